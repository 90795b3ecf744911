package demo

import (
	"testing"
)

func TestGenerate(t *testing.T) {
	ds, err := Generate(Options{Views: 16, Width: 40, Height: 30, TestEvery: 4, Seed: 2, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Train) != 12 || len(ds.Test) != 4 {
		t.Fatalf("%d train / %d test views, want 12 / 4", len(ds.Train), len(ds.Test))
	}
	if ds.Extent < 4 || ds.Extent > 6 {
		t.Fatalf("extent %v for a ring of radius 4.5", ds.Extent)
	}
	if len(ds.Points) == 0 || len(ds.Points) != len(ds.PointColors) {
		t.Fatalf("%d points, %d colours", len(ds.Points), len(ds.PointColors))
	}
	// Every view shows the scene: a good part of each image is not black.
	for _, v := range append(ds.Train, ds.Test...) {
		lit := 0
		for i := 0; i < len(v.Image.RGB); i += 3 {
			if v.Image.RGB[i]+v.Image.RGB[i+1]+v.Image.RGB[i+2] > 0.1 {
				lit++
			}
		}
		if lit < v.Image.W*v.Image.H/4 {
			t.Fatalf("view %s: only %d of %d pixels lit", v.Name, lit, v.Image.W*v.Image.H)
		}
	}
	// The scene is the same for the same seed.
	again, err := Generate(Options{Views: 16, Width: 40, Height: 30, TestEvery: 4, Seed: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range ds.Train[3].Image.RGB {
		if again.Train[3].Image.RGB[i] != x {
			t.Fatal("the demo scene differs between two generations with the same seed")
		}
	}
	if _, err := Generate(Options{Views: 1, Width: 40, Height: 30}); err == nil {
		t.Fatal("one view accepted")
	}
}
