package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxWordsPerSentence bounds the average sentence of README.md and of each
// docs/*.md (issue 31, §5: one idea a sentence).
const maxWordsPerSentence = 25

var (
	// fencedBlock is a ``` block, from one ``` to the next, across lines.
	fencedBlock = regexp.MustCompile("(?s)```.*?```")
	// listItem is a list item's marker at the start of a trimmed line.
	listItem = regexp.MustCompile(`^([-*]|\d+\.)\s`)
	// inlineCode is a `code` span within one paragraph.
	inlineCode = regexp.MustCompile("`[^`]*`")
	// mdLink is a [text](target) link; its text stays.
	mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// proseSentences measures a Markdown document's prose as
// /work/notes/s35/sentences.py (session 35's measure) does, and returns its
// words and its sentences:
//
//   - Fenced blocks are removed first: from each ``` to the next one.
//   - The rest is read line by line, each line trimmed. A blank line, a
//     table row ("|"), a heading ("#"), an HTML line ("<", e.g. <!-- walk -->)
//     and a list item ("- ", "* ", "1. ") end the paragraph; table rows,
//     headings and HTML lines are dropped, and a list item starts a new
//     paragraph with its marker removed. Other lines (an indented
//     continuation included) join the paragraph with a space.
//   - In a paragraph, a `code` span counts as one word, and a link
//     [text](target) as its text.
//   - A paragraph is cut into sentences after ".", "!" or "?" followed by
//     spaces and then a capital letter (A-Z), "`", "*", "(" or "["; a
//     paragraph's end ends a sentence too. So "(see X.) Then" is one
//     sentence, and "e.g. shardid" does not end one.
//   - A sentence's words are its space-separated fields.
//
// The one difference from Python: digits, spaces and trimming are those of
// Go's regexp and unicode packages, which differ from Python's only on
// characters the docs do not use (non-ASCII digits, U+001C-U+001F).
func proseSentences(doc string) (words, sentences int) {
	doc = fencedBlock.ReplaceAllString(doc, "")
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, line := range strings.Split(doc, "\n") {
		s := strings.TrimSpace(line)
		item := listItem.MatchString(s)
		if s == "" || strings.HasPrefix(s, "|") || strings.HasPrefix(s, "#") || item || strings.HasPrefix(s, "<") {
			flush()
			if item {
				cur = []string{listItem.ReplaceAllString(s, "")}
			}
			continue
		}
		cur = append(cur, s)
	}
	flush()
	for _, p := range paras {
		p = inlineCode.ReplaceAllString(p, "X")
		p = mdLink.ReplaceAllString(p, "${1}")
		for _, sentence := range splitSentences(p) {
			if n := len(strings.Fields(sentence)); n > 0 {
				words += n
				sentences++
			}
		}
	}
	return words, sentences
}

// splitSentences cuts a paragraph at each run of spaces that follows ".",
// "!" or "?" and precedes A-Z, "`", "*", "(" or "[" (sentences.py's
// (?<=[.!?])\s+(?=[A-Z`*(\[]), which Go's regexp cannot write).
func splitSentences(p string) []string {
	r := []rune(p)
	var out []string
	start := 0
	for i := 1; i < len(r); i++ {
		if !unicode.IsSpace(r[i]) || !strings.ContainsRune(".!?", r[i-1]) {
			continue
		}
		j := i
		for j < len(r) && unicode.IsSpace(r[j]) {
			j++
		}
		if j < len(r) && (('A' <= r[j] && r[j] <= 'Z') || strings.ContainsRune("`*([", r[j])) {
			out = append(out, string(r[start:i]))
			start = j
		}
		i = j - 1
	}
	return append(out, string(r[start:]))
}

// The measure counts as sentences.py does; each case's figures are that
// script's on the same text.
func TestProseSentencesMeasure(t *testing.T) {
	for _, c := range []struct {
		name      string
		doc       string
		words     int
		sentences int
	}{
		{"two sentences", "One two three. Four five.\n", 5, 2},
		{"lowercase after a stop", "Run it, e.g. shardid init. Then stop.\n", 7, 2},
		{"code and links", "Run `shardid rebalance apply --dir d` now. See [the guide](docs/x.md).\n", 6, 2},
		{"code opens a sentence", "Done. `apply` runs it.\n", 4, 2},
		{"a stop inside parentheses", "It waits (a minute.) Then it stops. (Always.)\n", 8, 2},
		{"fenced, heading, table, html dropped", "# Title\n\n```sh\nshardid a b c. D e f.\n```\n| a | b |\n|---|---|\n<!-- walk -->\nOne line.\n", 2, 1},
		{"list items and continuations", "Intro:\n\n- first item\n  goes on. Second\n- third\n1. fourth one\n", 9, 5},
		{"paragraph end ends a sentence", "No stop here\n\nNor here\n", 5, 2},
		{"spaces before a capital", "End.   Next one.\n", 3, 2},
		{"stop before lowercase", "Version 1.18 is old. ok fine.\n", 6, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, s := proseSentences(c.doc)
			require.Equal(t, [2]int{c.words, c.sentences}, [2]int{w, s}, "words, sentences")
		})
	}
}

// README.md and every docs/*.md say one idea a sentence: on average at most
// maxWordsPerSentence words a sentence of prose (issue 31, §5; before it ten
// of the fourteen averaged 25.1 to 35.6). Figures per file: -v.
func TestDocsShortSentences(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, path := range docs {
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		words, sentences := proseSentences(string(b))
		require.Positive(t, sentences, "%s has no prose", rel)
		avg := float64(words) / float64(sentences)
		t.Logf("%-24s %6d words %5d sentences avg %.1f", rel, words, sentences, avg)
		assert.LessOrEqual(t, avg, float64(maxWordsPerSentence),
			"%s averages %.1f words a sentence (%d words, %d sentences), over %d: split its longest sentences, one idea each (measure: go test ./cmd/shardid -run TestDocsShortSentences -v)",
			rel, avg, words, sentences, maxWordsPerSentence)
	}
}
