package config

import "strings"

// suggest returns the known key closest to an unknown one, for "did you
// mean …?" messages. Distances ignore case and the separators '.', '_' and
// '-', and a given name may match a key's full form or its name alone
// ("bin-mode", "rasterbin.mode" and the env spelling all land on
// raster.bin_mode). Short of an exact match, a key whose name equals the
// given last part wins (a key in the wrong section: optim.iterations →
// train.iterations).
func suggest(given string, keys []string) string {
	g := strings.ToLower(given)
	leaf := g
	if i := strings.LastIndex(g, "."); i >= 0 {
		leaf = g[i+1:]
	}
	ng := normKey(g)
	score := func(k string) int {
		d := editDistance(ng, normKey(k))
		if _, name, ok := strings.Cut(k, "."); ok {
			d = min(d, editDistance(ng, normKey(name)))
		}
		return d
	}
	pick := func(cands []string) (string, int) {
		best, bestD, bestRaw := "", -1, -1
		for _, k := range cands {
			d, raw := score(k), editDistance(g, k)
			if bestD < 0 || d < bestD || (d == bestD && raw < bestRaw) {
				best, bestD, bestRaw = k, d, raw
			}
		}
		return best, bestD
	}
	best, d := pick(keys)
	if d == 0 {
		return best
	}
	var sameLeaf []string
	for _, k := range keys {
		if _, name, _ := strings.Cut(k, "."); name == leaf {
			sameLeaf = append(sameLeaf, k)
		}
	}
	if len(sameLeaf) > 0 {
		best, _ = pick(sameLeaf)
	}
	return best
}

func normKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '_', '-':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// editDistance is the Levenshtein distance between a and b in bytes (keys
// are ASCII; anything else only makes the distance larger, never wrong).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
