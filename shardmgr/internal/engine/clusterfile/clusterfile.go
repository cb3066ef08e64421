// Package clusterfile edits one host of a cluster file in place, keeping
// everything else as written (comments, order, the other sections), and
// writes it atomically. The host commands (package hosts) and a drain
// change a host in the catalog and in the file together: a cluster file
// that disagrees with the catalog makes every move refuse
// (rebalance.ErrHostsNotApplied), and init would undo the catalog's change.
package clusterfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/shardid/shardid/shardmgr"
)

// Edit is a change of a cluster file prepared in memory: Write puts it in
// place, Undo puts the file back as it was.
type Edit struct {
	path     string
	old, new []byte
	mode     os.FileMode
	// Config is the cluster file as it reads after the edit (parsed and
	// validated).
	Config *shardmgr.Config
}

// SetHost prepares the edit of host name's key (dsn, drain) to value;
// a drain of false removes the key, as a file that never had it reads.
func SetHost(path, name, key, value string, lookup func(string) (string, bool)) (*Edit, error) {
	return prepare(path, lookup, func(hosts *yaml.Node) (bool, error) {
		h := findHost(hosts, name)
		if h == nil {
			return false, fmt.Errorf("%w: host %s is not in %s", shardmgr.ErrUnknownHost, name, path)
		}
		for i := 0; i+1 < len(h.Content); i += 2 {
			if h.Content[i].Value == key {
				v := h.Content[i+1]
				if key == "drain" {
					// As YAML reads it: true, True, yes...
					var was bool
					if err := v.Decode(&was); err == nil && strconv.FormatBool(was) == value {
						return false, nil
					}
				} else if v.Value == value {
					return false, nil
				}
				if key == "drain" && value == "false" {
					h.Content = slices.Delete(h.Content, i, i+2)
					return true, nil
				}
				v.SetString(value)
				if key == "drain" {
					v.Tag = "!!bool"
				}
				return true, nil
			}
		}
		if key == "drain" && value == "false" {
			return false, nil
		}
		v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
		if key == "drain" {
			v.Tag = "!!bool"
		}
		h.Content = append(h.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
		return true, nil
	})
}

// RemoveHost prepares the removal of host name from the hosts: list.
func RemoveHost(path, name string, lookup func(string) (string, bool)) (*Edit, error) {
	return prepare(path, lookup, func(hosts *yaml.Node) (bool, error) {
		h := findHost(hosts, name)
		if h == nil {
			return false, fmt.Errorf("%w: host %s is not in %s", shardmgr.ErrUnknownHost, name, path)
		}
		hosts.Content = slices.DeleteFunc(hosts.Content, func(n *yaml.Node) bool { return n == h })
		return true, nil
	})
}

func findHost(hosts *yaml.Node, name string) *yaml.Node {
	for _, h := range hosts.Content {
		for i := 0; h.Kind == yaml.MappingNode && i+1 < len(h.Content); i += 2 {
			if h.Content[i].Value == "name" && h.Content[i+1].Value == name {
				return h
			}
		}
	}
	return nil
}

// prepare reads the file, applies change to its hosts: list and checks
// that the result is a valid cluster file.
func prepare(path string, lookup func(string) (string, bool), change func(hosts *yaml.Node) (bool, error)) (*Edit, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(old, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", shardmgr.ErrConfig, path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: %s: not a cluster file", shardmgr.ErrConfig, path)
	}
	var hosts *yaml.Node
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "hosts" {
			hosts = top.Content[i+1]
		}
	}
	if hosts == nil || hosts.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%w: %s: no hosts: list", shardmgr.ErrConfig, path)
	}
	changed, err := change(hosts)
	if err != nil {
		return nil, err
	}
	if !changed {
		cfg, err := shardmgr.ParseConfig(old, path, lookup)
		if err != nil {
			return nil, err
		}
		return &Edit{path: path, old: old, new: old, mode: st.Mode().Perm(), Config: cfg}, nil
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	cfg, err := shardmgr.ParseConfig(out.Bytes(), path, lookup)
	if err != nil {
		return nil, err
	}
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	return &Edit{path: path, old: old, new: out.Bytes(), mode: st.Mode().Perm(), Config: cfg}, nil
}

// Changes reports whether the edit changes the file.
func (e *Edit) Changes() bool { return !bytes.Equal(e.old, e.new) }

// Write puts the edited file in place: written beside it, then renamed
// over it, so that a reader sees the old file or the new one, never half.
func (e *Edit) Write() error { return writeAtomic(e.path, e.new, e.mode) }

// Undo puts the file back as it was before Write.
func (e *Edit) Undo() error { return writeAtomic(e.path, e.old, e.mode) }

func writeAtomic(path string, data []byte, mode os.FileMode) (err error) {
	// Through a symbolic link, the file it names is replaced.
	if real, rerr := filepath.EvalSymlinks(path); rerr == nil {
		path = real
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cluster file: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
			err = fmt.Errorf("cluster file %s: %w", path, err)
		}
	}()
	_, werr := f.Write(data)
	err = errors.Join(werr, f.Chmod(mode), f.Sync(), f.Close())
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
