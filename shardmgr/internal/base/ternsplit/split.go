// This file is tern's statement splitter (github.com/jackc/tern/v2,
// migrate/internal/sqlsplit at v2.3.4), copied because it is internal to
// tern and a migration marked `---- tern: disable-tx ----` must be split
// exactly as tern splits it, so that the plain tern CLI and shardid run the
// same statements. Only names were changed.
//
// Copyright (c) 2011-2020 Jack Christensen. MIT License: permission is
// hereby granted, free of charge, to any person obtaining a copy of this
// software and associated documentation files (the "Software"), to deal in
// the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions: The above
// copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED
// "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
// NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A
// PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR
// COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY,
// WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF
// OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.

package ternsplit

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Split splits sql into a slice of strings each containing one SQL statement.
func Split(sql string) []string {
	l := &splitLexer{
		src:          sql,
		splitStateFn: splitRawState,
	}

	for l.splitStateFn != nil {
		l.splitStateFn = l.splitStateFn(l)
	}

	if len(l.statements) == 0 {
		l.statements = []string{sql}
	}

	return l.statements
}

type splitLexer struct {
	src          string
	start        int
	pos          int
	nested       int // multiline comment nesting level.
	splitStateFn splitStateFn

	statements []string
}

func (l *splitLexer) addStatement(s string) {
	s = strings.TrimSpace(s)
	if len(s) > 0 {
		l.statements = append(l.statements, s)
	}
}

type splitStateFn func(*splitLexer) splitStateFn

func splitRawState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case 'e', 'E':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune == '\'' {
				l.pos += width
				return splitEscapeStringState
			}
		case '\'':
			return splitSingleQuoteState
		case '"':
			return splitDoubleQuoteState
		case '$':
			tag, ok := splitReadDollarTag(l.src[l.pos:])
			if ok {
				l.pos += len(tag) + 1 // tag + "$"
				return splitDollarQuoteState(tag)
			}
		case ';':
			l.addStatement(l.src[l.start:l.pos])
			l.start = l.pos
			return splitRawState
		case '-':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune == '-' {
				l.pos += width
				return splitOneLineCommentState
			}
		case '/':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune == '*' {
				l.pos += width
				return splitMultilineCommentState
			}
		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}

func splitSingleQuoteState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case '\'':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune != '\'' {
				return splitRawState
			}
			l.pos += width
		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}

func splitDoubleQuoteState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case '"':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune != '"' {
				return splitRawState
			}
			l.pos += width
		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}

func splitDollarQuoteState(openingTag string) func(l *splitLexer) splitStateFn {
	return func(l *splitLexer) splitStateFn {
		for {
			r, width := utf8.DecodeRuneInString(l.src[l.pos:])
			l.pos += width

			switch r {
			case '$':
				tag, ok := splitReadDollarTag(l.src[l.pos:])
				if ok && tag == openingTag {
					l.pos += len(tag) + 1 // tag + "$"
					return splitRawState
				}
				l.pos += width
			case utf8.RuneError:
				if l.pos-l.start > 0 {
					l.addStatement(l.src[l.start:l.pos])
					l.start = l.pos
				}
				return nil
			}
		}
	}
}

func splitReadDollarTag(src string) (tag string, ok bool) {
	nextRune, width := utf8.DecodeRuneInString(src)
	if nextRune == '$' {
		return "", true
	}

	if !unicode.IsLetter(nextRune) && nextRune != '_' {
		// Not a valid identifier. Perhaps it's a positional parameter like $1.
		return "", false
	}

	tagWidth := width
	for {
		nextRune, width := utf8.DecodeRuneInString(src[tagWidth:])
		if nextRune == '$' {
			return src[:tagWidth], true
		} else if unicode.IsLetter(nextRune) || nextRune == '_' || ('0' <= nextRune && nextRune <= '9') {
			tagWidth += width
		} else {
			// Unexpected rune or end of string. This is not a valid identifier, bail out.
			return "", false
		}
	}
}

func splitEscapeStringState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case '\\':
			_, width = utf8.DecodeRuneInString(l.src[l.pos:])
			l.pos += width
		case '\'':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune != '\'' {
				return splitRawState
			}
			l.pos += width
		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}

func splitOneLineCommentState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case '\\':
			_, width = utf8.DecodeRuneInString(l.src[l.pos:])
			l.pos += width
		case '\n', '\r':
			return splitRawState
		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}

func splitMultilineCommentState(l *splitLexer) splitStateFn {
	for {
		r, width := utf8.DecodeRuneInString(l.src[l.pos:])
		l.pos += width

		switch r {
		case '/':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune == '*' {
				l.pos += width
				l.nested++
			}
		case '*':
			nextRune, width := utf8.DecodeRuneInString(l.src[l.pos:])
			if nextRune != '/' {
				continue
			}

			l.pos += width
			if l.nested == 0 {
				return splitRawState
			}
			l.nested--

		case utf8.RuneError:
			if l.pos-l.start > 0 {
				l.addStatement(l.src[l.start:l.pos])
				l.start = l.pos
			}
			return nil
		}
	}
}
