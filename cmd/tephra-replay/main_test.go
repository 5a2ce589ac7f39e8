package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTraceOfTheCommand(t *testing.T) {
	assert.Equal(t, "day.csv", traceOf("tephra-replay --out x --trace day.csv --horizon 29h"))
	assert.Equal(t, "day.csv", traceOf("tephra-replay --trace=day.csv"))
	assert.Empty(t, traceOf("tephra-replay --generate day.csv"))
}

// The report goes between the page's markers, its headings one level down, and the rest of the
// page stays as it was; a page without the markers is refused, not overwritten.
func TestPublishSectionReplacesOnlyTheReport(t *testing.T) {
	reportBegin, reportEnd := markers("")
	otherBegin, otherEnd := markers("fairness")
	assert.Equal(t, "<!-- replay-report:fairness:begin -->", otherBegin)
	path := filepath.Join(t.TempDir(), "replay.md")
	page := "# Replay\n\nintro\n\n" + reportBegin + "\nold report\n" + reportEnd + "\n\nafter\n\n" + otherBegin + "\nother\n" + otherEnd + "\n"
	require.NoError(t, os.WriteFile(path, []byte(page), 0o644))
	require.NoError(t, publishSection(path, "", "# Replay of day.csv\n\n## Outcomes\n\n| a |\n"))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "# Replay\n\nintro\n\n"+reportBegin+"\n## Replay of day.csv\n\n### Outcomes\n\n| a |\n"+reportEnd+"\n\nafter\n\n"+otherBegin+"\nother\n"+otherEnd+"\n", string(data))
	require.NoError(t, publishSection(path, "fairness", "# Mixed\n"))
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), otherBegin+"\n## Mixed\n"+otherEnd, "the named section is replaced")
	assert.Contains(t, string(data), reportBegin+"\n## Replay of day.csv", "the day's is kept")
	assert.NotEmpty(t, publishedNameProblem("../docs"), "a name that is not a DNS label could write outside docs/replay")
	assert.Empty(t, publishedNameProblem("fairness"))

	bare := filepath.Join(t.TempDir(), "bare.md")
	require.NoError(t, os.WriteFile(bare, []byte("# nothing here\n"), 0o644))
	assert.ErrorContains(t, publishSection(bare, "", "# x\n"), "has no <!-- replay-report:begin --> ... <!-- replay-report:end --> section")
	data, err = os.ReadFile(bare)
	require.NoError(t, err)
	assert.Equal(t, "# nothing here\n", string(data))
}
