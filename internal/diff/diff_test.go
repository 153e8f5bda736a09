package diff

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"both empty", "", "", ""},
		{"change in the middle",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"missing file",
			"",
			"a\nb\n",
			"@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"emptied file",
			"a\n",
			"",
			"@@ -1 +0,0 @@\n-a\n"},
		{"insert at start",
			"b\nc\n",
			"a\nb\nc\n",
			"@@ -1,2 +1,3 @@\n+a\n b\n c\n"},
		{"no newline at end",
			"a\nb",
			"a\nb\n",
			"@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"two hunks",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			"one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			"@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n"},
		{"changes 6 lines apart share a hunk",
			"1\n2\n3\n4\n5\n6\n7\n8\n",
			"one\n2\n3\n4\n5\n6\n7\neight\n",
			"@@ -1,8 +1,8 @@\n-1\n+one\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+eight\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := string(Unified("old", "new", []byte(c.old), []byte(c.new)))
			want := ""
			if c.want != "" {
				want = "--- old\n+++ new\n" + c.want
			}
			if got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// apply applies a unified diff made by Unified to old, checking its hunk
// headers and context on the way.
func apply(t *testing.T, old, patch string) string {
	t.Helper()
	a := splitLines([]byte(old))
	lines := strings.SplitAfter(patch, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		t.Fatalf("bad header:\n%s", patch)
	}
	var out []string
	next := 0 // index in a of the first line not yet copied
	var last *string
	for _, l := range lines[2:] {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@ "):
			var os, ol, ns, nl int
			hdr := strings.Fields(l)
			os, ol = parseSpan(t, strings.TrimPrefix(hdr[1], "-"))
			ns, nl = parseSpan(t, strings.TrimPrefix(hdr[2], "+"))
			if ol > 0 {
				os--
			}
			if os < next {
				t.Fatalf("hunks overlap or go back: %s", l)
			}
			out = append(out, a[next:os]...)
			next = os
			if nl > 0 {
				ns--
			}
			if ns != len(out) {
				t.Fatalf("hunk %s: new side starts at %d, want %d", strings.TrimSpace(l), ns, len(out))
			}
		case l == "\\ No newline at end of file\n":
			*last = strings.TrimSuffix(*last, "\n")
		case l[0] == ' ' || l[0] == '-':
			if next >= len(a) || a[next] != l[1:] && a[next] != strings.TrimSuffix(l[1:], "\n") {
				t.Fatalf("context or deleted line %q does not match old line %d", l, next+1)
			}
			if l[0] == ' ' {
				out = append(out, a[next])
				last = &out[len(out)-1]
			} else {
				last = new(string)
			}
			next++
		case l[0] == '+':
			out = append(out, l[1:])
			last = &out[len(out)-1]
		default:
			t.Fatalf("bad line %q", l)
		}
	}
	out = append(out, a[next:]...)
	return strings.Join(out, "")
}

func parseSpan(t *testing.T, s string) (start, lines int) {
	t.Helper()
	first, second, ok := strings.Cut(s, ",")
	start, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return start, 1
	}
	lines, err = strconv.Atoi(second)
	if err != nil {
		t.Fatal(err)
	}
	return start, lines
}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(30) {
		b.WriteString(string(rune('a' + r.IntN(4))))
		b.WriteByte('\n')
	}
	if r.IntN(4) == 0 {
		b.WriteString("z") // no newline at the end
	}
	return b.String()
}

// TestRandomRoundTrip applies the diff of random texts and checks that it
// turns the old text into the new one, and that the edit script is no
// longer than the trivial one.
func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		old, new := randomText(r), randomText(r)
		patch := string(Unified("a", "b", []byte(old), []byte(new)))
		if (patch == "") != (old == new) {
			t.Fatalf("case %d: empty diff %v for different texts %v", i, patch == "", old != new)
		}
		if patch == "" {
			continue
		}
		if got := apply(t, old, patch); got != new {
			t.Fatalf("case %d: applying\n%s\nto %q gives %q, want %q", i, patch, old, got, new)
		}
	}
}

// TestShortest checks the edit script has the length of a longest common
// subsequence, computed the slow way.
func TestShortest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		a, b := splitLines([]byte(randomText(r))), splitLines([]byte(randomText(r)))
		changes := 0
		for _, o := range edits(a, b) {
			if o.kind != ' ' {
				changes++
			}
		}
		if want := len(a) + len(b) - 2*lcs(a, b); changes != want {
			t.Fatalf("case %d: %d changes, want %d", i, changes, want)
		}
	}
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func ExampleUnified() {
	old := "package p\nconst A = 1\nconst B = 2\n"
	new := "package p\nconst A = 2\nconst B = 2\n"
	fmt.Print(string(Unified("p.go (on disk)", "p.go (generated)", []byte(old), []byte(new))))
	// Output:
	// --- p.go (on disk)
	// +++ p.go (generated)
	// @@ -1,3 +1,3 @@
	//  package p
	// -const A = 1
	// +const A = 2
	//  const B = 2
}
