package config

import "net/url"

// validateOTel checks otel_endpoint is a collector's base URL, so "config check" finds a
// typo before serve starts exporting to nowhere.
func (c *Config) validateOTel(bad func(key, format string, args ...any)) {
	if c.OTelEndpoint == "" {
		return
	}
	u, err := url.Parse(c.OTelEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		bad("otel_endpoint", "want an http:// or https:// URL without credentials, e.g. http://127.0.0.1:4318")
	}
}
