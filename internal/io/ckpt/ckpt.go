package ckpt

import (
	"fmt"
	"hash/crc32"
)

// Kind is the element type of a section.
type Kind uint8

// Section kinds, as stored in the file.
const (
	KindFloat32 Kind = 1
	KindUint64  Kind = 2
	KindBytes   Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindFloat32:
		return "float32"
	case KindUint64:
		return "uint64"
	case KindBytes:
		return "bytes"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// elemSize is the bytes one element takes in the file, 0 for an unknown kind.
func (k Kind) elemSize() int {
	switch k {
	case KindFloat32:
		return 4
	case KindUint64:
		return 8
	case KindBytes:
		return 1
	}
	return 0
}

// MaxNameLen is the longest section name, in bytes.
const MaxNameLen = 1024

// Version is the format version this package writes and reads.
const Version = 1

const magic = "RLXCKPT\x00"

// castagnoli is the CRC-32C table: the polynomial with hardware support on
// amd64 and arm64, so that checking a multi-gigabyte checkpoint costs little.
// It is only read after package initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// section is one named array. Exactly one of f32, u64, b is used, by kind.
type section struct {
	name string
	kind Kind
	f32  []float32
	u64  []uint64
	b    []byte
}

func (s *section) count() int {
	switch s.kind {
	case KindFloat32:
		return len(s.f32)
	case KindUint64:
		return len(s.u64)
	}
	return len(s.b)
}

// File is a checkpoint in memory: named sections in the order they were
// first put (or read). The zero value is an empty checkpoint ready to use.
//
// Put methods keep the slice they are given and getters return the stored
// slice, without copying: checkpoints are large, and the caller owns the
// data. Do not change a slice between putting it and writing the file.
type File struct {
	path     string // where it was read from, for error messages
	sections []section
}

func (f *File) put(s section) {
	for i := range f.sections {
		if f.sections[i].name == s.name {
			f.sections[i] = s
			return
		}
	}
	f.sections = append(f.sections, s)
}

// PutFloat32 stores v as the float32 section name, replacing any section of
// that name (in its place).
func (f *File) PutFloat32(name string, v []float32) {
	f.put(section{name: name, kind: KindFloat32, f32: v})
}

// PutUint64 stores v as the uint64 section name, replacing any section of
// that name.
func (f *File) PutUint64(name string, v []uint64) {
	f.put(section{name: name, kind: KindUint64, u64: v})
}

// PutBytes stores b as the bytes section name, replacing any section of
// that name.
func (f *File) PutBytes(name string, b []byte) {
	f.put(section{name: name, kind: KindBytes, b: b})
}

// Names lists the section names in file order.
func (f *File) Names() []string {
	n := make([]string, len(f.sections))
	for i := range f.sections {
		n[i] = f.sections[i].name
	}
	return n
}

// Kind returns the kind of section name, and whether it exists.
func (f *File) Kind(name string) (Kind, bool) {
	if s := f.find(name); s != nil {
		return s.kind, true
	}
	return 0, false
}

func (f *File) find(name string) *section {
	for i := range f.sections {
		if f.sections[i].name == name {
			return &f.sections[i]
		}
	}
	return nil
}

// get returns section name if it exists with kind k, else an error naming
// the file, the section and what is wrong.
func (f *File) get(name string, k Kind) (*section, error) {
	where := "ckpt"
	if f.path != "" {
		where = "ckpt: " + f.path
	}
	s := f.find(name)
	if s == nil {
		return nil, fmt.Errorf("%s: no section %q", where, name)
	}
	if s.kind != k {
		return nil, fmt.Errorf("%s: section %q holds %s, not %s", where, name, s.kind, k)
	}
	return s, nil
}

// Float32 returns the float32 section name.
func (f *File) Float32(name string) ([]float32, error) {
	s, err := f.get(name, KindFloat32)
	if err != nil {
		return nil, err
	}
	return s.f32, nil
}

// Uint64 returns the uint64 section name.
func (f *File) Uint64(name string) ([]uint64, error) {
	s, err := f.get(name, KindUint64)
	if err != nil {
		return nil, err
	}
	return s.u64, nil
}

// Bytes returns the bytes section name.
func (f *File) Bytes(name string) ([]byte, error) {
	s, err := f.get(name, KindBytes)
	if err != nil {
		return nil, err
	}
	return s.b, nil
}
