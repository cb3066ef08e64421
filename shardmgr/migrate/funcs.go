package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// templateFuncNames are the names of the functions a shard migration may call
// beside text/template's own (and tern's install_snapshot): sprig's pure
// string, math, list, dictionary, conversion and encoding helpers. A
// migration is rendered wherever `shardid migrate render` runs, a pull
// request's check included, and what it renders may land in the catalog
// of every shard (a COMMENT is readable by every role), so nothing here
// reads the environment, the network, the file system, the clock or a
// random source: sprig's env, expandenv, getHostByName, now, the date,
// random, uuid, crypto and os* functions are left out. docs/migrations.md
// lists them; a test keeps the two in step.
var templateFuncNames = []string{
	// strings
	"abbrev", "abbrevboth", "trunc", "trim", "trimAll", "trimall", "trimPrefix", "trimSuffix",
	"upper", "lower", "title", "untitle", "substr", "repeat", "nospace", "initials", "swapcase",
	"snakecase", "camelcase", "kebabcase", "wrap", "wrapWith", "contains", "hasPrefix", "hasSuffix",
	"quote", "squote", "cat", "indent", "nindent", "replace", "plural", "split", "splitList",
	"splitn", "join", "sortAlpha",
	// regular expressions
	"regexMatch", "mustRegexMatch", "regexFind", "mustRegexFind", "regexFindAll", "mustRegexFindAll",
	"regexReplaceAll", "mustRegexReplaceAll", "regexReplaceAllLiteral", "mustRegexReplaceAllLiteral",
	"regexSplit", "mustRegexSplit", "regexQuoteMeta",
	// conversions and encodings
	"toString", "toStrings", "atoi", "int", "int64", "float64", "toDecimal",
	"b64enc", "b64dec", "b32enc", "b32dec", "sha1sum", "sha256sum", "sha512sum", "adler32sum",
	"toJson", "mustToJson", "toPrettyJson", "mustToPrettyJson", "toRawJson", "mustToRawJson",
	"fromJson", "mustFromJson",
	// math
	"add", "add1", "sub", "mul", "div", "mod", "max", "min", "biggest", "ceil", "floor", "round",
	"addf", "add1f", "subf", "mulf", "divf", "maxf", "minf", "seq", "until", "untilStep",
	// defaults, logic and types
	"default", "empty", "coalesce", "all", "any", "ternary", "fail",
	"typeOf", "typeIs", "typeIsLike", "kindOf", "kindIs", "deepEqual", "deepCopy", "mustDeepCopy",
	// lists
	"list", "tuple", "append", "mustAppend", "prepend", "mustPrepend", "first", "mustFirst",
	"rest", "mustRest", "last", "mustLast", "initial", "mustInitial", "reverse", "mustReverse",
	"uniq", "mustUniq", "without", "mustWithout", "has", "mustHas", "slice", "mustSlice",
	"concat", "compact", "mustCompact", "chunk", "mustChunk",
	// dictionaries
	"dict", "get", "set", "unset", "hasKey", "pluck", "keys", "values", "pick", "omit", "dig",
	"merge", "mustMerge", "mergeOverwrite", "mustMergeOverwrite",
	// slash-separated paths, as text
	"base", "dir", "clean", "ext", "isAbs",
}

// TemplateFuncs returns the names of the sprig functions a shard migration
// may call beside text/template's own and install_snapshot (see
// templateFuncNames for why these and no others).
func TemplateFuncs() []string { return slices.Clone(templateFuncNames) }

// templateFuncs is the function map a migration's templates are parsed
// with: templateFuncNames taken from sprig, and install_snapshot.
func templateFuncs(installSnapshot func(string) (string, error)) template.FuncMap {
	all := sprig.TxtFuncMap()
	out := make(template.FuncMap, len(templateFuncNames)+1)
	for _, name := range templateFuncNames {
		f, ok := all[name]
		if !ok {
			panic("migrate: sprig has no function " + name)
		}
		out[name] = f
	}
	out["install_snapshot"] = installSnapshot
	return out
}

// undefinedFunc matches text/template's parse error for a function the
// map does not hold.
var undefinedFunc = regexp.MustCompile(`function "([^"]+)" not defined`)

// explainFunc adds to a parse error about a sprig function left out of
// TemplateFuncs why it is refused.
func explainFunc(err error) error {
	if err == nil {
		return nil
	}
	m := undefinedFunc.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if _, inSprig := sprig.TxtFuncMap()[m[1]]; !inSprig || slices.Contains(templateFuncNames, m[1]) {
		return err
	}
	return fmt.Errorf("%w (%s is a sprig function migrations may not call: it reads the environment, the network, the clock or a random source; docs/migrations.md lists the functions they may call)", err, m[1])
}

// codePackage is tern's code package (migrate.LoadCodePackage) parsed with
// the migrations' own functions: every *.sql under fsys, named by its path
// there, executed from install.sql.
func codePackage(fsys fs.FS, funcs template.FuncMap, data map[string]any) (string, error) {
	root := template.New("main").Option("missingkey=error").Funcs(funcs)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".sql") {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		_, err = root.New(p).Parse(string(body))
		return explainFunc(err)
	})
	if err != nil {
		return "", err
	}
	install := root.Lookup("install.sql")
	if install == nil {
		return "", errors.New("install.sql not found")
	}
	var b strings.Builder
	if err := install.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}
