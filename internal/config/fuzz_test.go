package config

import (
	"reflect"
	"testing"

	"github.com/rlxsplat/rlxsplat/configs"
)

// roundTrip checks that a valid Config survives YAML and Parse unchanged.
func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("Load/Parse returned an invalid Config: %v", err)
	}
	b, err := c.YAML()
	if err != nil {
		t.Fatalf("YAML: %v", err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(YAML()): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(exported(back), exported(c)) {
		t.Fatalf("round trip changed the config:\n%s", b)
	}
}

// FuzzParse feeds arbitrary bytes to Parse: it must return a Config or an
// error, never panic, and whatever it accepts must round-trip.
func FuzzParse(f *testing.F) {
	// Seeds: the presets without default.yaml's comments, which only make
	// every execution (and the minimisation of new inputs) slower without
	// reaching more code.
	def, err := Load(Input{})
	if err != nil {
		f.Fatal(err)
	}
	b, err := def.YAML()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	fast, err := configs.Read("fast")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fast)
	for _, s := range []string{
		"", "~", "- 1", "train: 5", "train:\n  iterations: 1e5\n",
		"data:\n  background: [1, 0.5, 0]\n", "train:\n  eval_steps: &a [1]\n  x: *a\n",
		"a: &a [*a]", "train: {iterations: .nan}", "output:\n  formats: ply\n",
		"train:\n  seed: 0x7fffffffffffffff\n", "train:\n  iterations: 99999999999999999999\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		roundTrip(t, c)
	})
}

// FuzzLoadText feeds arbitrary environment and flag text to Load.
func FuzzLoadText(f *testing.F) {
	f.Add("RLXSPLAT_TRAIN_ITERATIONS", "100", "train.eval_steps", "1,2")
	f.Add("RLXSPLAT_DATA_BACKGROUND", "[1,1,1]", "raster.bin_mode", "cpu-conic")
	f.Add(EnvForceGPUConic, "", "output.formats", "ply,")
	f.Add("RLXSPLAT_", "x", "", "")
	f.Add("RLXSPLAT_TRAIN_SEED", "1e300", "train.seed", "-9223372036854775808")
	f.Fuzz(func(t *testing.T, envName, envVal, flagKey, flagVal string) {
		c, err := Load(Input{
			Env:   []string{envName + "=" + envVal},
			Flags: map[string]string{flagKey: flagVal},
		})
		if err != nil {
			return
		}
		roundTrip(t, c)
	})
}
