package metrics

// Checks of the files under deploy/ that need no tools: the Grafana
// dashboard and the Prometheus rules use only metrics this package exports,
// and the systemd unit says what it must. scripts/check-deploy.sh runs the
// real tools (systemd-analyze verify, promtool) where they are available.

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const deployDir = "../deploy"

// metricRef matches a ublk-raid metric name as written in a PromQL
// expression or a description.
var metricRef = regexp.MustCompile(`\bublkraid_[a-z0-9_]*[a-z0-9]\b`)

// checkRefs fails the test for every ublkraid_ name in text that is not an
// exported family, or a histogram family's _bucket, _sum or _count series,
// and returns the families used.
func checkRefs(t *testing.T, where, text string, families map[string]string) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	seen := map[string]bool{}
	for _, name := range metricRef.FindAllString(text, -1) {
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, ok := families[name]; ok {
			used[name] = true
			continue
		}
		ok := false
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base, found := strings.CutSuffix(name, suffix)
			if found && families[base] == "histogram" {
				used[base], ok = true, true
			}
		}
		if !ok {
			t.Errorf("%s uses %s, which ublk-raid does not export", where, name)
		}
	}
	return used
}

func readDeploy(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDeployDashboard(t *testing.T) {
	families := familyNames(t)
	var dash struct {
		Title      string
		UID        string
		Templating struct {
			List []struct {
				Name  string
				Type  string
				Query any
			}
		}
		Panels []struct {
			ID      int
			Type    string
			Title   string
			GridPos *struct{ H, W, X, Y int }
			Targets []struct {
				Expr  string
				RefID string
			}
		}
	}
	text := readDeploy(t, "grafana/ublk-raid.json")
	if err := json.Unmarshal([]byte(text), &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard lacks title, uid or panels")
	}

	var exprs []string
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d (%q): needs title, type and a size", p.ID, p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: target without expr or refId", p.Title)
			}
			if !metricRef.MatchString(tg.Expr) {
				t.Errorf("panel %q: %q uses no ublk-raid metric", p.Title, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		} else if s, ok := v.Query.(string); ok && v.Type == "query" {
			exprs = append(exprs, s)
		}
	}

	used := checkRefs(t, "dashboard", strings.Join(exprs, "\n"), families)
	// Every name anywhere in the file (descriptions too) must exist.
	checkRefs(t, "dashboard text", text, families)
	// And the dashboard shows everything there is, so that a new metric
	// gets a panel.
	for name := range families {
		if !used[name] {
			t.Errorf("dashboard has no query on %s", name)
		}
	}
}

func TestDeployAlerts(t *testing.T) {
	families := familyNames(t)
	text := readDeploy(t, "prometheus/alerts.yml")
	checkRefs(t, "alerts.yml", text, families)
	checkRefs(t, "alerts_test.yml", readDeploy(t, "prometheus/alerts_test.yml"), families)

	// A line-based look at the rules (no YAML parser in go.mod): every
	// alert has an expr using a ublk-raid metric (or Prometheus's up).
	var alerts []string
	sc := bufio.NewScanner(strings.NewReader(text))
	expr := map[string]bool{}
	cur := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "- alert:"); ok {
			cur = strings.TrimSpace(name)
			alerts = append(alerts, cur)
		} else if strings.HasPrefix(line, "expr:") && cur != "" {
			expr[cur] = true
		}
	}
	for _, want := range []string{
		"UblkRaidArrayDegraded", "UblkRaidMemberFailed", "UblkRaidRebuildStalled", "UblkRaidBitmapWaitsHigh",
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yml lacks %s", want)
		}
	}
	for _, a := range alerts {
		if !expr[a] {
			t.Errorf("alert %s has no expr", a)
		}
	}

	scrape := readDeploy(t, "prometheus/scrape.yml")
	for _, want := range []string{"job_name: ublk-raid", `"127.0.0.1:9999"`, "- alerts.yml"} {
		if !strings.Contains(scrape, want) {
			t.Errorf("scrape.yml lacks %q", want)
		}
	}
}

// TestDeploySystemdUnit checks the directives the daemon relies on; the
// syntax and dependencies are systemd-analyze verify's job.
func TestDeploySystemdUnit(t *testing.T) {
	unit := map[string][]string{} // "Section.Key" -> values
	section := ""
	for line := range strings.Lines(readDeploy(t, "systemd/ublk-raid.service")) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("bad line %q", line)
			}
			unit[section+"."+k] = append(unit[section+"."+k], strings.Fields(v)...)
		}
	}
	for key, want := range map[string]string{
		"Unit.DefaultDependencies": "no",
		"Unit.Wants":               "systemd-modules-load.service",
		"Unit.After":               "systemd-modules-load.service",
		"Unit.Before":              "local-fs-pre.target",
		"Service.Type":             "notify",
		"Service.ExecStart":        "/usr/local/sbin/ublk-raid",
		"Service.Restart":          "on-failure",
		"Service.OOMScoreAdjust":   "-1000",
		"Service.LimitMEMLOCK":     "infinity",
	} {
		if !slices.Contains(unit[key], want) {
			t.Errorf("%s = %v, want it to include %s", key, unit[key], want)
		}
	}
	if got := unit["Service.ExecStart"]; !slices.Equal(got, []string{"/usr/local/sbin/ublk-raid", "serve"}) {
		t.Errorf("ExecStart = %v", got)
	}

	var mods []string
	for line := range strings.Lines(readDeploy(t, "modules-load.d/ublk-raid.conf")) {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			mods = append(mods, line)
		}
	}
	if !slices.Equal(mods, []string{"ublk_drv"}) {
		t.Errorf("modules-load.d loads %v, want [ublk_drv]", mods)
	}
}
