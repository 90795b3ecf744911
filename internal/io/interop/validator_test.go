package interop

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
)

// validateJS runs Khronos' glTF validator (npm gltf-validator) on a file
// and prints its issues as JSON.
const validateJS = `
const v = require(process.argv[2]);
const fs = require('fs');
v.validateBytes(new Uint8Array(fs.readFileSync(process.argv[3]))).then(r => {
  console.log(JSON.stringify({numErrors: r.issues.numErrors, numWarnings: r.issues.numWarnings,
    messages: r.issues.messages.map(m => ({code: m.code, severity: m.severity, pointer: m.pointer || '', message: m.message}))}));
}).catch(e => { console.error(String(e)); process.exit(1); });
`

type report struct {
	NumErrors, NumWarnings int
	Messages               []struct {
		Code, Pointer, Message string
		Severity               int // 0 error, 1 warning, 2 info, 3 hint
	}
}

// TestGLTFValidator: the validator finds no error in our .glb except
// MESH_PRIMITIVE_INVALID_ATTRIBUTE on the extension's own attributes
// (KHR_gaussian_splatting:SCALE, ...), which it does not know, and no
// warning at all.
func TestGLTFValidator(t *testing.T) {
	node, pkg := tool(t, "gltf-validator")
	src := read(t, sourceScene(t))
	dir := t.TempDir()
	glb := filepath.Join(dir, "ours.glb")
	if err := gltfsplat.WriteFile(glb, src.Gaussians, gltfsplat.Options{SHDegree: 3}); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "validate.cjs")
	if err := os.WriteFile(js, []byte(validateJS), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, js, pkg, glb).Output()
	if err != nil {
		t.Fatalf("gltf-validator: %v", err)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("validator output %q: %v", out, err)
	}
	counts := map[string]int{}
	for _, m := range r.Messages {
		counts[m.Code]++
		ours := m.Code == "MESH_PRIMITIVE_INVALID_ATTRIBUTE" && strings.Contains(m.Pointer, "/attributes/"+gltfsplat.ExtensionName+":")
		if m.Severity <= 1 && !ours {
			t.Errorf("validator %s (severity %d) at %s: %s", m.Code, m.Severity, m.Pointer, m.Message)
		}
	}
	// SCALE, ROTATION, OPACITY and the 16 SH attributes of degree 3.
	if counts["MESH_PRIMITIVE_INVALID_ATTRIBUTE"] != 19 || r.NumWarnings != 0 {
		t.Errorf("%d errors, %d warnings (%v), want the 19 extension attributes and no warning", r.NumErrors, r.NumWarnings, counts)
	}
	t.Logf("gltf-validator on our .glb: %d errors, %d warnings; by code: %v", r.NumErrors, r.NumWarnings, counts)
}
