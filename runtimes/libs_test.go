package runtimes_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

func TestNodeLibraries(t *testing.T) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal([]byte(runtimes.NodeLibraries()), &pkg))
	assert.Equal(t, []string{"@opentelemetry/api", "axios", "cloudevents", "co", "express", "morgan", "mz"}, runtimes.NodeLibraryNames())
	for name, v := range pkg.Dependencies {
		assert.Regexp(t, `^\d+\.\d+\.\d+$`, v, "%s is pinned", name)
	}
}

func TestMentionsNodeLibrary(t *testing.T) {
	tests := map[string]bool{
		`const axios = require('axios')`:                       true,
		`import { CloudEvent } from "cloudevents"`:             true,
		"const r = require(`express/lib/router`)":              true,
		`const { trace } = require('@opentelemetry/api');`:     true,
		`module.exports = { main: () => 'axios is not used' }`: false,
		`const a = require('axios-retry')`:                     false,
		`module.exports = { main: () => require('left-pad') }`: false,
		`const fs = require('mz/fs')`:                          true,
		`const co = require("co")`:                             true,
		`import morgan from 'morgan'`:                          true,
		`const cors = require('cors')`:                         false,
		`const c = require('colors/safe')`:                     false,
	}
	for src, want := range tests {
		assert.Equal(t, want, runtimes.MentionsNodeLibrary(src), src)
	}
}
