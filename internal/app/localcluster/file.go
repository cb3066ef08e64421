package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// writeConfig writes the cluster file for servers: the catalog on the
// first, an app database on each, and a segments: section with a seg
// database on each, as the README's sections expect.
func writeConfig(path string, shards int, servers []Server) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by shardid local up; shardid local add-host appends hosts.\n")
	fmt.Fprintf(&b, "cluster: local\nshards: %d\n", shards)
	fmt.Fprintf(&b, "catalog: postgres://postgres@127.0.0.1:%d/shardid_catalog?sslmode=disable\n", servers[0].Port)
	b.WriteString("# migrations: shard-migrations   # the shards' migrations, relative to this file: init, migrate,\n")
	b.WriteString("#                                # rebalance apply and shard move then need no --dir\n")
	b.WriteString("hosts:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "  - name: %s\n    dsn: %s\n", s.Name, s.DSN)
	}
	b.WriteString("segments:\n  sources:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "    - postgres://postgres@127.0.0.1:%d/seg?sslmode=disable\n", s.Port)
	}
	b.WriteString(`  tags:
    payment: {}
    order:
      min_step: 500
      max_step: 20000
      format: "ORD-{date}-{seq:10}"
`)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// appendHost adds a host to the hosts: list of the cluster file at path,
// keeping the rest of the file (comments included) as it is.
func appendHost(path, name, dsn string) error {
	doc, hosts, err := readHosts(path)
	if err != nil {
		return err
	}
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	hosts.Content = append(hosts.Content, &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map",
		Content: []*yaml.Node{str("name"), str(name), str("dsn"), str(dsn)}})
	return writeYAML(path, doc)
}

// readHosts reads the cluster file at path, and its hosts: list.
func readHosts(path string) (doc *yaml.Node, hosts *yaml.Node, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	doc = &yaml.Node{}
	if err := yaml.Unmarshal(data, doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("%s: not a cluster file", path)
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "hosts" {
			hosts = top.Content[i+1]
		}
	}
	if hosts == nil || hosts.Kind != yaml.SequenceNode {
		return nil, nil, fmt.Errorf("%s: no hosts: list", path)
	}
	return doc, hosts, nil
}

// writeYAML writes doc to path, indented as the file was written.
func writeYAML(path string, doc *yaml.Node) error {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// removeHostFromFile takes host name out of the hosts: list of the
// cluster file at path, keeping the rest of the file as it is.
func removeHostFromFile(path, name string) error {
	doc, hosts, err := readHosts(path)
	if err != nil {
		return err
	}
	hosts.Content = slices.DeleteFunc(hosts.Content, func(h *yaml.Node) bool {
		for i := 0; h.Kind == yaml.MappingNode && i+1 < len(h.Content); i += 2 {
			if h.Content[i].Value == "name" && h.Content[i+1].Value == name {
				return true
			}
		}
		return false
	})
	return writeYAML(path, doc)
}
