"""Command-line tools: `doctor` (the environment), `check` (a data set's files) and
`apidoc` (writes docs/api.md and docs/schema.md)."""
