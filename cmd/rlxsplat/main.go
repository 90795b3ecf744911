// Command rlxsplat trains 3D Gaussian Splatting scenes: `train` fits a
// capture, `render` draws a trained scene, `bench` times the step and
// `parity` checks every gradient (and every GPU engine against the CPU).
package main

import "os"

func main() { os.Exit(run(os.Args[1:], newStreams())) }
