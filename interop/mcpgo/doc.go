// Package mcpgo is a test-only module: real github.com/mark3labs/mcp-go v1.2.1 peers
// (cmd/mcpgo-server, cmd/mcpgo-client) for taskbridge's interop tests. It has its own go.mod
// so the main module never depends on mcp-go. See interop/README.md.
package mcpgo
