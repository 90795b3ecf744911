// Package ckpt is the checkpoint container: a small binary file of named,
// typed sections (float32 arrays, uint64 arrays, raw bytes), each guarded by
// a CRC, written atomically so that a crash never leaves a broken file where
// a checkpoint should be (design.md §7).
//
// File layout, all integers little-endian:
//
//	offset 0   magic    [8]byte  "RLXCKPT\x00"
//	       8   version  uint32   1
//	      12   sections uint32   number of sections that follow
//	then, per section:
//	           kind     uint8    1 float32, 2 uint64, 3 bytes
//	           name len uint16   1..MaxNameLen
//	           name     [len]byte UTF-8
//	           count    uint64   number of elements (bytes for kind 3)
//	           payload  [count·elemsize]byte
//	           crc      uint32   CRC-32C of kind..payload
//	and last:
//	           crc      uint32   CRC-32C of every byte before it
//
// The reader checks the magic, the version, every length against the bytes
// really left (so that a corrupt length never causes a huge allocation),
// every section CRC, the file CRC and that nothing follows; each error names
// the file, the section and the byte offset.
//
// Non-goals: deciding what a checkpoint holds (the trainer names and fills
// the sections: parameters, Adam moments, statistics, step, RNG state,
// config); compression; random access or memory mapping; reading files
// written by other programs.
package ckpt
