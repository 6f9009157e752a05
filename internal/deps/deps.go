//go:build tools

// Package deps pins the project's direct dependencies until each is imported by real code.
package deps

import (
	_ "github.com/gorilla/websocket"
	_ "github.com/hashicorp/golang-lru/v2"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "github.com/tidwall/gjson"
	_ "go.uber.org/goleak"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
