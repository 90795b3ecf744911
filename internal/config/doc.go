// Package config resolves rlxsplat's run configuration into one typed,
// validated Config value.
//
// Layers, lowest first (design.md §2, style.md §6 item 9):
//
//  1. defaults: the embedded configs/default.yaml, the one source of every
//     default (Keys, Default and Help expose it to flag help);
//  2. a config file (Input.File, from --config, or an embedded preset
//     name such as "fast"; or Input.FileData, a checkpoint's stored
//     config): YAML with the same sections, partial;
//  3. the environment (Input.Env, passed in like os.Environ() so that tests
//     can inject it): RLXSPLAT_<SECTION>_<KEY>=value, lists comma-separated;
//     RLX_FUSED_GPU_CONIC_SCANLINE, with any value (even empty), forces
//     raster.bin_mode to gpu-conic, above every other environment variable
//     and the file;
//  4. flags the user set (Input.Flags, config key → text); a flag beats
//     everything, RLX_FUSED_GPU_CONIC_SCANLINE included, because it is the
//     most explicit request a user can make.
//
// Every Load uses its own viper instance as the layered store (never the
// global one); callers read the typed Config, never viper. Values are
// converted strictly before they reach viper, so a float is never truncated
// into an integer and a word is never read as a number. Every problem (an
// unknown key with the closest known one, a wrong type, a value out of range)
// is reported at once, each naming its key and where it came from.
//
// Non-goals: this package does not define command-line flags, read os.Environ
// or files other than the one it is given, print anything, or know what the
// settings do beyond their allowed values; the trainer and the engines
// interpret them. It does not watch files or reload.
package config
