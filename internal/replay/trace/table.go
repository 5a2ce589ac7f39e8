package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// RowError is a row that a reader skipped, and why. Readers go on past a bad row, so that one
// typo in a trace of a hundred thousand jobs costs one job, and report all of them at once.
type RowError struct {
	// Line is the row's line in its file; the header is line 1.
	Line int
	// Name is the row's job name, if it has one.
	Name string
	// Err says what is wrong with the row.
	Err error
}

// Error reads like `line 7 (job "x"): duration "-3": must be more than 0`.
func (e RowError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d (job %q): %v", e.Line, e.Name, e.Err)
}

// Unwrap returns Err.
func (e RowError) Unwrap() error { return e.Err }

// cellError is a cell that does not hold what its column asks for.
type cellError struct {
	column, cell string
	err          error
}

func (e cellError) Error() string {
	if e.cell == "" {
		return fmt.Sprintf("%s: %v", e.column, e.err)
	}
	return fmt.Sprintf("%s %q: %v", e.column, e.cell, e.err)
}

func (e cellError) Unwrap() error { return e.err }

// errRequired is the error of an empty cell that its column needs.
var errRequired = errors.New("required, but empty")

// table reads a CSV file by column name: its header says where each known column is, so that
// the columns may come in any order, spelled in any case, and columns a reader does not know
// (a pandas index, a trace's own bookkeeping) are skipped rather than refused.
type table struct {
	r *csv.Reader
	// columns maps each known column of the header to its index in a record.
	columns map[string]int
	// width is the header's number of fields; a record of another width is a bad row.
	width int
	// record and line are the current record and the line it starts on; index is its place
	// among the records after the header, from 0, as pandas numbers rows.
	record      []string
	line, index int
}

// newTable reads the header of r. It fails if r has no header, if a known column appears
// twice, or if a required one is missing; known lists every column a reader uses.
func newTable(r io.Reader, known, required []string) (*table, error) {
	cr := csv.NewReader(r)
	// Widths are checked row by row (scan), so that a ragged row is skipped, not fatal.
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file: want a CSV header")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	t := &table{r: cr, columns: map[string]int{}, width: len(header), index: -1}
	for i, field := range header {
		// A UTF-8 byte order mark, as spreadsheets write, would otherwise hide the first column.
		name := columnName(strings.TrimPrefix(field, "\ufeff"))
		if !slices.Contains(known, name) {
			continue
		}
		if _, dup := t.columns[name]; dup {
			return nil, fmt.Errorf("header: column %s appears twice", name)
		}
		t.columns[name] = i
	}
	var missing []string
	for _, name := range required {
		if !t.has(name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("header %q: missing required column(s) %s", strings.Join(header, ","),
			strings.Join(missing, ", "))
	}
	return t, nil
}

// columnName is how a header field is matched: case and surrounding spaces do not count.
func columnName(field string) string {
	return strings.ToLower(strings.TrimSpace(field))
}

// has says whether the header has column name.
func (t *table) has(name string) bool {
	_, ok := t.columns[name]
	return ok
}

// cell is the current record's cell of column name, without surrounding spaces; "" if the
// header has no such column.
func (t *table) cell(name string) string {
	i, ok := t.columns[name]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.record[i])
}

// scan calls row for each record after the header. row returns the job's name, if it got that
// far, and why the record is skipped, if it is; scan turns that into a RowError, as it does
// for a record whose number of fields differs from the header's. The error is a fatal one: a
// CSV that cannot be read on, such as a stray quote.
func (t *table) scan(row func() (name string, err error)) ([]RowError, error) {
	var problems []RowError
	for {
		record, err := t.r.Read()
		if errors.Is(err, io.EOF) {
			return problems, nil
		}
		if err != nil {
			return problems, err
		}
		t.record = record
		t.line, _ = t.r.FieldPos(0)
		t.index++
		if len(record) != t.width {
			problems = append(problems, RowError{Line: t.line,
				Err: fmt.Errorf("has %d fields, the header %d", len(record), t.width)})
			continue
		}
		if name, err := row(); err != nil {
			problems = append(problems, RowError{Line: t.line, Name: name, Err: err})
		}
	}
}
