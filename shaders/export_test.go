package shaders

// PTXSharedBytes is sharedBytes for the external tests (budget_spec_test.go), which import the
// generated launch code and through it this package.
var PTXSharedBytes = sharedBytes
