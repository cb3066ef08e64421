package hosts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// setClusterFileDSN sets host name's dsn in the cluster file at path,
// keeping the rest of the file as written (comments, order), and replaces
// the file atomically (a temporary file renamed over it).
func setClusterFileDSN(path, name, dsn string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	v, err := hostDSNNode(&doc, name)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	v.SetString(dsn)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// hostDSNNode finds the value node of host name's dsn key.
func hostDSNNode(doc *yaml.Node, name string) (*yaml.Node, error) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("not a cluster file (no mapping at the top)")
	}
	hosts := mapValue(doc.Content[0], "hosts")
	if hosts == nil || hosts.Kind != yaml.SequenceNode {
		return nil, errors.New("no hosts list")
	}
	for _, h := range hosts.Content {
		if h.Kind != yaml.MappingNode {
			continue
		}
		if n := mapValue(h, "name"); n != nil && n.Value == name {
			if v := mapValue(h, "dsn"); v != nil && v.Kind == yaml.ScalarNode {
				return v, nil
			}
			return nil, fmt.Errorf("host %s has no dsn", name)
		}
	}
	return nil, fmt.Errorf("host %s is not in the hosts list", name)
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
