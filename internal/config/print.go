package config

import (
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/taskbridge/taskbridge/internal/redact"
)

// Mask is what a secret is printed as.
const Mask = "********"

// secretFields are the names of section fields whose values are masked when printed.
var secretFields = map[string]bool{"key": true, "secret": true, "password": true, "token": true, "client_secret": true}

// Print writes the effective configuration as YAML that Load accepts back, every secret
// masked, each key commented with where its value came from.
func (c *Config) Print(w io.Writer) error {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range fields() {
		fv := reflect.ValueOf(c).Elem().Field(f.index)
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: f.key, LineComment: "# " + c.source(f.key)}
		var v *yaml.Node
		switch x := fv.Interface().(type) {
		case []string:
			v = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, s := range x {
				v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: s})
			}
		default:
			if fv.Kind() == reflect.Struct && fv.Type().Name() != "Time" {
				v = &yaml.Node{}
				if err := v.Encode(x); err != nil {
					return err
				}
				maskNode(v)
				break
			}
			s := display(fv, f)
			switch f.secret {
			case "true":
				s = MaskSecret(s)
			case "dsn":
				s = MaskDSN(s)
			case "url":
				s = redact.URL(s) // no userinfo, no query: either may carry a credential
			}
			v = &yaml.Node{Kind: yaml.ScalarNode, Value: s}
		}
		if v.Kind == yaml.SequenceNode {
			k.LineComment, v.LineComment = "", k.LineComment
		}
		doc.Content = append(doc.Content, k, v)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return enc.Close()
}

// MaskSecret hides a secret: empty stays empty (so "unset" is visible); an
// "Authorization"-style "Scheme value" keeps its scheme word.
func MaskSecret(s string) string {
	if s == "" {
		return ""
	}
	if scheme, _, ok := strings.Cut(s, " "); ok && len(scheme) < 16 {
		return scheme + " " + Mask
	}
	return Mask
}

// MaskDSN hides the password of a URL-form DSN (and a password= parameter).
func MaskDSN(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "MASKED")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "MASKED")
		u.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(u.String(), "MASKED", Mask)
}

// maskNode masks the values of secret-named fields anywhere in a YAML tree.
func maskNode(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			maskNode(c)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if secretFields[strings.ToLower(k.Value)] && v.Kind == yaml.ScalarNode && v.Value != "" {
				v.Value, v.Style, v.Tag = Mask, 0, "!!str"
				continue
			}
			maskNode(v)
		}
	}
}
