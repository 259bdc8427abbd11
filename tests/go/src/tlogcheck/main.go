// tlogcheck checks, with Go's golang.org/x/mod/sumdb/note and sumdb/tlog,
// what spillguard's transparency-log code wrote: keys, a signed
// checkpoint and proofs over a tree whose leaf i holds i as 4 big-endian
// bytes.
//
// Usage: tlogcheck SIGNER.key VERIFIER.pub CHECKPOINT PROOFS
//
// PROOFS has one check per line, hashes in base64:
//
//	incl SIZE INDEX ROOT P1,P2,...      (an inclusion proof)
//	cons OLD NEW OLDROOT NEWROOT P1,... (a consistency proof)
//	leaf HASH                           (the next leaf's hash)
//
// With leaf lines (a real log's leaves, in order, before any check), the
// tree is made of them instead of the numbered leaves.
//
// It prints "checked N, failed M, checkpoint SIZE ok|<error>" and exits 0
// whether or not checks failed: the caller reads the counts.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type store []tlog.Hash

func (s store) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = s[x]
	}
	return out, nil
}

func leaf(i int64) []byte {
	d := make([]byte, 4)
	binary.BigEndian.PutUint32(d, uint32(i))
	return d
}

func hash(text string) tlog.Hash {
	b, _ := base64.StdEncoding.DecodeString(text)
	var h tlog.Hash
	copy(h[:], b)
	return h
}

func proof(field []string, at int) []tlog.Hash {
	var p []tlog.Hash
	if len(field) > at && field[at] != "" {
		for _, text := range strings.Split(field[at], ",") {
			p = append(p, hash(text))
		}
	}
	return p
}

func number(text string) int64 {
	n, _ := strconv.ParseInt(text, 10, 64)
	return n
}

func main() {
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Println("cannot read", path, err)
			os.Exit(2)
		}
		return b
	}
	skey, vkey, checkpoint, proofs := read(os.Args[1]), read(os.Args[2]), read(os.Args[3]), read(os.Args[4])

	// The tree as tlog stores it, grown to the largest size asked of it.
	var s store
	var leaves int64
	var given []tlog.Hash
	for _, line := range strings.Split(string(proofs), "\n") {
		if strings.HasPrefix(line, "leaf ") {
			given = append(given, hash(strings.TrimPrefix(line, "leaf ")))
		}
	}
	add := func(n int64) {
		for ; leaves < n; leaves++ {
			var hashes []tlog.Hash
			if given != nil {
				if leaves >= int64(len(given)) {
					return
				}
				hashes, _ = tlog.StoredHashesForRecordHash(leaves, given[leaves], s)
			} else {
				hashes, _ = tlog.StoredHashes(leaves, leaf(leaves), s)
			}
			s = append(s, hashes...)
		}
	}

	verdict := "ok"
	size := int64(-1)
	if _, err := note.NewSigner(strings.TrimSpace(string(skey))); err != nil {
		verdict = "signer key: " + err.Error()
	} else if v, err := note.NewVerifier(strings.TrimSpace(string(vkey))); err != nil {
		verdict = "verifier key: " + err.Error()
	} else if n, err := note.Open(checkpoint, note.VerifierList(v)); err != nil {
		verdict = "open: " + err.Error()
	} else {
		lines := strings.Split(n.Text, "\n")
		if len(lines) < 3 || lines[0] != v.Name() {
			verdict = "not a checkpoint of " + v.Name()
		} else {
			size = number(lines[1])
			add(size)
			root, _ := tlog.TreeHash(size, s)
			if root != hash(lines[2]) {
				verdict = "the checkpoint's root is not the tree's"
			}
		}
	}

	checked, failed := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(proofs)), "\n") {
		if line == "" || strings.HasPrefix(line, "leaf ") {
			continue
		}
		field := strings.Split(line, " ")
		checked++
		switch field[0] {
		case "incl":
			n, index := number(field[1]), number(field[2])
			add(n)
			record := tlog.RecordHash(leaf(index))
			if given != nil && index < int64(len(given)) {
				record = given[index]
			}
			if tlog.CheckRecord(tlog.RecordProof(proof(field, 4)), n, hash(field[3]), index, record) != nil {
				failed++
			}
		case "cons":
			old, n := number(field[1]), number(field[2])
			add(n)
			if tlog.CheckTree(tlog.TreeProof(proof(field, 5)), n, hash(field[4]), old, hash(field[3])) != nil {
				failed++
			}
		default:
			failed++
		}
	}
	fmt.Printf("checked %d, failed %d, checkpoint %d %s\n", checked, failed, size, verdict)
}
