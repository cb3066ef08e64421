package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"text/template"

	tern "github.com/jackc/tern/v2/migrate"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/limits"
	shsql "github.com/shardid/shardid/sql"
)

// Formats that WriteRendered can write.
const (
	// FormatTern writes NNN_name.sql files: up SQL, the tern separator,
	// down SQL. The plain tern CLI applies them with
	// --version-table <schema>.schema_version.
	FormatTern = "tern"
	// FormatGolangMigrate writes NNN_name.up.sql and NNN_name.down.sql,
	// which golang-migrate's migrate CLI applies.
	FormatGolangMigrate = "golang-migrate"
)

// ternSeparator splits a tern migration into its up and down halves.
const ternSeparator = "---- create above / drop below ----"

var disableTxRE = regexp.MustCompile(`(?m)^---- tern: disable-tx ----$`)

// MigrationSet is a directory of tern migrations (NNN_name.sql, shared
// templates in subfolders) that every logical shard runs, rendered per
// shard with the template values
//
//	{{.schema}}    the shard's schema, e.g. shard_0005
//	{{.shard_id}}  its logical shard id, e.g. 5 (an int)
//	{{.next_id}}   its generator call, e.g. shard_0005.next_id()
//
// Loading parses and checks the files; rendering executes them as tern
// does (the same template names, shared templates and install_snapshot),
// so the plain tern CLI given the same values runs the same SQL. The
// functions a migration may call are TemplateFuncs, not all of sprig's:
// none reads the environment, the network or a file outside the set.
type MigrationSet struct {
	fsys  fs.FS
	names []string // index = version - 1

	// strict are the templates parsed once with missingkey=error, per
	// migration up and down; mu guards their execution, since
	// install_snapshot reads data.
	mu     sync.Mutex
	strict [][2]*template.Template
	data   map[string]any
}

// LoadMigrationSet reads the migrations held at the root of fsys. It fails
// with an error wrapping ErrMigrationSet when there are none, when their
// numbers have gaps or duplicates, or when a template does not parse or
// calls a function outside TemplateFuncs. It reads whatever fsys serves:
// for a directory, LoadMigrationDir (or os.Root's FS) keeps every read
// inside it, where os.DirFS follows symbolic links anywhere.
func LoadMigrationSet(fsys fs.FS) (*MigrationSet, error) {
	fsys = limitFS{fsys, MaxMigrationFileSize}
	names, err := tern.FindMigrations(fsys)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: directory not found", ErrMigrationSet)
		}
		return nil, fmt.Errorf("%w: %w", ErrMigrationSet, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no migration files (NNN_name.sql)", ErrMigrationSet)
	}
	s := &MigrationSet{fsys: fsys, names: names}
	if s.strict, err = s.strictTemplates(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMigrationSet, err)
	}
	// Most template errors do not depend on the shard: find them here,
	// for shard 0. Render checks each shard again.
	if err := s.strictCheck(templateData(0, shsql.DefaultSchema(0))); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMigrationSet, err)
	}
	return s, nil
}

// LoadMigrationDir is LoadMigrationSet on a directory of the file system,
// with the directory named in errors. It reads nothing outside dir: a
// symbolic link that leads out of it (to /etc/passwd, to a key) is refused
// with an error naming the link, whether a migration, a shared template or
// a snapshot (os.Root holds every open inside dir).
func LoadMigrationDir(dir string) (*MigrationSet, error) {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w: directory not found", dir, ErrMigrationSet)
		}
		return nil, fmt.Errorf("%w: %w", ErrMigrationSet, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %w: not a directory", dir, ErrMigrationSet)
	}
	// The root stays open while the set lives (install_snapshot reads
	// when rendering); os.Root closes it when collected.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", dir, ErrMigrationSet, err)
	}
	s, err := LoadMigrationSet(root.FS())
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("%s: %w", dir, explainEscape(err))
	}
	return s, nil
}

// explainEscape says what os.Root's "path escapes from parent" means here.
func explainEscape(err error) error {
	if !strings.Contains(err.Error(), "path escapes from parent") {
		return err
	}
	return fmt.Errorf("%w (a symbolic link that leads outside the migrations directory: refused)", err)
}

// MaxMigrationFileSize is the largest migration or template file a
// MigrationSet reads: 8 MiB. Every shard renders every file, so a larger
// one (or a device such as /dev/zero behind a symlink) is refused with an
// error wrapping ErrFileTooLarge instead of being read into memory.
const MaxMigrationFileSize = 8 << 20

// limitFS refuses to read more than max bytes from any one file.
type limitFS struct {
	fsys fs.FS
	max  int64
}

func (l limitFS) Open(name string) (fs.File, error) {
	f, err := l.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > l.max {
		f.Close()
		return nil, limits.TooLarge(name, l.max)
	}
	return &limitFile{File: f, name: name, max: l.max, left: l.max}, nil
}

type limitFile struct {
	fs.File
	name      string
	max, left int64
}

func (f *limitFile) Read(p []byte) (int, error) {
	if int64(len(p)) > f.left+1 {
		p = p[:f.left+1]
	}
	n, err := f.File.Read(p)
	f.left -= int64(n)
	if f.left < 0 {
		return 0, limits.TooLarge(f.name, f.max)
	}
	return n, err
}

func (f *limitFile) ReadDir(n int) ([]fs.DirEntry, error) {
	d, ok := f.File.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: errors.New("not a directory")}
	}
	return d.ReadDir(n)
}

// Latest is the highest version: the number of migrations.
func (s *MigrationSet) Latest() int { return len(s.names) }

// Names are the migration file names; Names()[v-1] is version v.
func (s *MigrationSet) Names() []string { return append([]string(nil), s.names...) }

// Name is the file name of version v, or "" when there is none.
func (s *MigrationSet) Name(v int) string {
	if v < 1 || v > len(s.names) {
		return ""
	}
	return s.names[v-1]
}

// RenderedMigration is one migration as one shard runs it.
type RenderedMigration struct {
	// Version is the version the shard is at once the migration ran up.
	Version int
	// Name is the file name, e.g. 001_create_likes.sql.
	Name string
	// Up and Down are the two halves' SQL for this shard; Down is empty
	// when the migration is irreversible.
	Up   string
	Down string
	// UpNoTx and DownNoTx are set when the half carries
	// `---- tern: disable-tx ----`: its statements run one by one outside
	// a transaction.
	UpNoTx, DownNoTx bool
}

// templateData is what a shard's migrations see as template values.
func templateData(shard int, schema string) map[string]any {
	return map[string]any{
		"schema":   schema,
		"shard_id": shard,
		"next_id":  schema + ".next_id()",
	}
}

// Render renders every migration for logical shard shard in schema. An
// error (wrapping ErrMigrationSet) names the file, the half and the line,
// including a template value that does not exist ({{.nope}}), which tern
// alone would render as "<no value>".
func (s *MigrationSet) Render(shard int, schema string) ([]RenderedMigration, error) {
	out, err := s.execute(templateData(shard, schema))
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d: %w", ErrMigrationSet, shard, err)
	}
	for i := range out {
		if !containsSQL(out[i].Up) {
			return nil, fmt.Errorf("%w: shard %d: %s: %w", ErrMigrationSet, shard, out[i].Name, tern.ErrNoFwMigration)
		}
	}
	return out, nil
}

// containsSQL is tern's test of an up half: a line that is neither empty
// nor a -- comment.
func containsSQL(sql string) bool {
	for line := range strings.SplitSeq(sql, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}

// strictTemplates parses the files as tern does (shared templates from
// subfolders, the same template names) but with TemplateFuncs instead of
// all of sprig, and with missingkey=error, which tern does not set. It
// returns, per migration, the up and down templates; install_snapshot
// evaluates with s.data.
func (s *MigrationSet) strictTemplates() ([][2]*template.Template, error) {
	snapshotFuncs := templateFuncs(nil)
	delete(snapshotFuncs, "install_snapshot") // tern's code packages have none
	root := template.New("main").Option("missingkey=error").Funcs(templateFuncs(func(name string) (string, error) {
		sub, err := fs.Sub(s.fsys, "snapshots/"+name)
		if err != nil {
			return "", err
		}
		return codePackage(sub, snapshotFuncs, s.data)
	}))
	err := fs.WalkDir(s.fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Dir(p) == "." || path.Ext(p) != ".sql" {
			return nil
		}
		body, err := fs.ReadFile(s.fsys, p)
		if err != nil {
			return err
		}
		_, err = root.New(p).Parse(string(body))
		return explainFunc(err)
	})
	if err != nil {
		return nil, err
	}
	out := make([][2]*template.Template, len(s.names))
	for i, name := range s.names {
		body, err := fs.ReadFile(s.fsys, name)
		if err != nil {
			return nil, err
		}
		up, down, hasDown := strings.Cut(string(body), ternSeparator)
		if out[i][0], err = root.New(filepath.Base(name) + " up").Parse(strings.TrimSpace(up)); err != nil {
			return nil, explainFunc(err)
		}
		if hasDown {
			if out[i][1], err = root.New(filepath.Base(name) + " down").Parse(strings.TrimSpace(down)); err != nil {
				return nil, explainFunc(err)
			}
		}
	}
	return out, nil
}

// strictCheck executes every template with data and discards the output.
func (s *MigrationSet) strictCheck(data map[string]any) error {
	_, err := s.execute(data)
	return err
}

// execute renders every migration with data.
func (s *MigrationSet) execute(data map[string]any) ([]RenderedMigration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = data
	out := make([]RenderedMigration, len(s.strict))
	var buf bytes.Buffer
	for i, pair := range s.strict {
		var halves [2]string
		for j, t := range pair {
			if t == nil {
				continue
			}
			buf.Reset()
			if err := t.Execute(&buf, data); err != nil {
				return nil, err
			}
			halves[j] = buf.String()
		}
		out[i] = RenderedMigration{
			Version: i + 1, Name: s.names[i], Up: halves[0], Down: halves[1],
			UpNoTx: disableTxRE.MatchString(halves[0]), DownNoTx: disableTxRE.MatchString(halves[1]),
		}
	}
	return out, nil
}

// renderAll renders the migrations of every listed shard, so that a
// template that fails for one shard only is found before anything runs.
func (s *MigrationSet) renderAll(shards []shardmgr.Shard) (map[int][]RenderedMigration, error) {
	out := make(map[int][]RenderedMigration, len(shards))
	for _, sh := range shards {
		r, err := s.Render(sh.ID, sh.Schema)
		if err != nil {
			return nil, err
		}
		out[sh.ID] = r
	}
	return out, nil
}

// WriteRendered writes rendered migrations into dir (created when
// missing) in format FormatTern or FormatGolangMigrate, and returns the
// paths written. Files of the same names are replaced.
func WriteRendered(dir, format string, migs []RenderedMigration) ([]string, error) {
	type file struct{ name, body string }
	var files []file
	switch format {
	case FormatTern, "":
		for _, m := range migs {
			body := ternEscape(m.Up) + "\n\n" + ternSeparator + "\n\n" + ternEscape(m.Down)
			files = append(files, file{m.Name, strings.TrimSpace(body) + "\n"})
		}
	case FormatGolangMigrate:
		for _, m := range migs {
			base := strings.TrimSuffix(m.Name, ".sql")
			files = append(files, file{base + ".up.sql", golangMigrateBody(m.Up, m.UpNoTx)})
			if m.Down != "" {
				files = append(files, file{base + ".down.sql", golangMigrateBody(m.Down, m.DownNoTx)})
			}
		}
	default:
		return nil, fmt.Errorf("unknown format %q (tern or golang-migrate)", format)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(files))
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ternEscape makes rendered SQL survive a second rendering: the tern CLI
// reads every migration file as a Go template again, so a "{{" that the
// first rendering produced (a two-dimensional array literal '{{1,2}}',
// say) would be taken for an action. Each "{{" becomes an action that
// prints "{{"; "}}" outside an action is plain text already.
func ternEscape(sql string) string {
	return strings.ReplaceAll(sql, "{{", `{{"{{"}}`)
}

// golangMigrateBody is one half for golang-migrate, which sends a file as
// one multi-statement query (one implicit transaction). A disable-tx half
// needs the driver's x-multi-statement=true to run statement by statement;
// the header says so.
func golangMigrateBody(sql string, noTx bool) string {
	if noTx {
		sql = "-- tern: disable-tx. With golang-migrate, run this file with x-multi-statement=true\n" +
			"-- in the database URL so that its statements run one by one, outside a transaction.\n" + sql
	}
	return strings.TrimSpace(sql) + "\n"
}
