package ops

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// The /status chart: legacy clients per day (a line) above legacy task creations per day
// (bars), over the report window, with the sunset marked, so an operator sees the curve going
// to zero before the date. It is inline SVG built here from numbers and dates only (nothing a
// client sent reaches it), so the page keeps its CSP without scripts; <title> elements give
// each point and bar a hover text.

// Chart geometry, in SVG user units (the SVG scales to the page width, at most chartW px).
const (
	chartW     = 880
	chartLeft  = 52  // y labels
	chartRight = 864 // chartW minus a margin
	sunsetY    = 16  // the sunset label's baseline, above both panels
	p1Top      = 58  // clients panel
	p1Bottom   = 154
	p2Top      = 200 // task creations panel
	p2Bottom   = 296
	chartH     = 326 // x labels below p2Bottom
)

// chartColours are the series' colours (GitHub's palette, like the rest of the page).
const (
	colourClients = "#0969da"
	colourTasks   = "#bf8700"
	colourSunset  = "#cf222e"
	colourGrid    = "#d9dee3"
	colourMuted   = "#5b6670"
)

// axis is the days the chart shows: the report days, then future days up to the sunset
// when it falls within as many days again as the window has.
type axis struct {
	days   []DayRow
	future int       // extra empty days after today
	sunset time.Time // zero: none configured
}

func newAxis(days []DayRow, sunset time.Time) axis {
	a := axis{days: days, sunset: sunset}
	if len(days) == 0 || sunset.IsZero() {
		return a
	}
	last := days[len(days)-1].Day
	if ahead := int(sunset.Sub(last) / (24 * time.Hour)); ahead > 0 && ahead <= len(days) {
		a.future = ahead
	}
	return a
}

func (a axis) slots() int { return len(a.days) + a.future }

func (a axis) slotW() float64 { return float64(chartRight-chartLeft) / float64(a.slots()) }

// x is the left edge of day slot i.
func (a axis) x(i int) float64 { return chartLeft + float64(i)*a.slotW() }

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 1), the top of a y axis.
func niceMax(v int) int {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(v))))
	for _, m := range []float64{1, 2, 5, 10} {
		if top := m * p; top >= float64(v) {
			return int(top)
		}
	}
	return v
}

// legacyChart renders the chart for the report days; "" without days.
func legacyChart(days []DayRow, sunset time.Time) template.HTML {
	if len(days) == 0 {
		return ""
	}
	a := newAxis(days, sunset)
	var b strings.Builder
	last := days[len(days)-1]
	fmt.Fprintf(&b, `<svg id="legacy-chart" class="chart" viewBox="0 0 %d %d" width="%d" role="img" aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH, chartW)
	fmt.Fprintf(&b, `<title id="chart-title">Legacy clients and legacy task creations per day</title>`)
	fmt.Fprintf(&b, `<desc id="chart-desc">%d days from %s to %s. Today: %d legacy clients, %d task creations. %s</desc>`,
		len(days), day(days[0].Day), day(last.Day), last.Clients, last.Tasks, sunsetSentence(sunset, last.Day))
	b.WriteString(`<g font-family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif" font-size="15">`)
	a.shadeFuture(&b)
	maxClients, maxTasks := 0, 0
	for _, d := range days {
		maxClients, maxTasks = max(maxClients, d.Clients), max(maxTasks, d.Tasks)
	}
	a.panel(&b, "Legacy clients per day", colourClients, p1Top, p1Bottom, niceMax(maxClients))
	a.panel(&b, "Legacy task creations per day", colourTasks, p2Top, p2Bottom, niceMax(maxTasks))
	a.clientsLine(&b, niceMax(maxClients))
	a.taskBars(&b, niceMax(maxTasks))
	a.xLabels(&b)
	a.sunsetMark(&b)
	b.WriteString(`</g></svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and formatted dates only
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// sunsetSentence says where the sunset is relative to today, for the chart's description.
func sunsetSentence(sunset, today time.Time) string {
	switch {
	case sunset.IsZero():
		return "No sunset date is configured."
	case sunset.After(today):
		return fmt.Sprintf("Sunset on %s, in %d days.", day(sunset), int(sunset.Sub(today)/(24*time.Hour)))
	}
	return fmt.Sprintf("Sunset passed on %s.", day(sunset))
}

// shadeFuture shades the days after today the axis shows up to the sunset.
func (a axis) shadeFuture(b *strings.Builder) {
	if a.future == 0 {
		return
	}
	x := a.x(len(a.days))
	fmt.Fprintf(b, `<rect class="future" x="%.1f" y="%d" width="%.1f" height="%d" fill="#f6f8fa"/>`, x, p1Top-4, chartRight-x, p2Bottom-p1Top+4)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s" text-anchor="middle" font-size="13">until the sunset</text>`, (x+chartRight)/2, (p1Bottom+p2Top)/2+14, colourMuted)
}

// panel draws a panel's title, its grid lines and y labels (0, half, top).
func (a axis) panel(b *strings.Builder, title, colour string, top, bottom, yMax int) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" rx="2" fill="%s"/>`, chartLeft, top-23, colour)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="600" fill="#1d2329">%s</text>`, chartLeft+16, top-14, title)
	for _, v := range []int{0, yMax / 2, yMax} {
		if v == yMax/2 && (yMax < 2 || yMax%2 != 0) {
			continue
		}
		y := yOf(v, yMax, top, bottom)
		stroke := colourGrid
		if v == 0 {
			stroke = "#8c959f"
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1"/>`, chartLeft, y, chartRight, y, stroke)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="%s" text-anchor="end" font-size="13">%d</text>`, chartLeft-8, y+4, colourMuted, v)
	}
}

// yOf maps v in [0, yMax] into the panel [bottom, top].
func yOf(v, yMax, top, bottom int) float64 {
	return float64(bottom) - float64(v)/float64(yMax)*float64(bottom-top)
}

// clientsLine draws the clients per day as a line with an area under it and a point a day.
func (a axis) clientsLine(b *strings.Builder, yMax int) {
	var pts []string
	for i, d := range a.days {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", a.x(i)+a.slotW()/2, yOf(d.Clients, yMax, p1Top, p1Bottom)))
	}
	first, last := a.x(0)+a.slotW()/2, a.x(len(a.days)-1)+a.slotW()/2
	fmt.Fprintf(b, `<polygon points="%.1f,%d %s %.1f,%d" fill="%s" fill-opacity="0.12"/>`, first, p1Bottom, strings.Join(pts, " "), last, p1Bottom, colourClients)
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`, strings.Join(pts, " "), colourClients)
	r := min(3.5, a.slotW()/3)
	for i, d := range a.days {
		fmt.Fprintf(b, `<circle class="point" cx="%.1f" cy="%.1f" r="%.1f" fill="%s"><title>%s: %s</title></circle>`,
			a.x(i)+a.slotW()/2, yOf(d.Clients, yMax, p1Top, p1Bottom), r, colourClients, day(d.Day), plural(d.Clients, "legacy client"))
	}
}

// taskBars draws the task creations per day as bars.
func (a axis) taskBars(b *strings.Builder, yMax int) {
	w := max(a.slotW()*0.7, 1)
	for i, d := range a.days {
		y := yOf(d.Tasks, yMax, p2Top, p2Bottom)
		fmt.Fprintf(b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="1" fill="%s"><title>%s: %s</title></rect>`,
			a.x(i)+(a.slotW()-w)/2, y, w, float64(p2Bottom)-y, colourTasks, day(d.Day), plural(d.Tasks, "legacy task creation"))
	}
}

// xLabels writes a date under some days: every step days, ending at today's.
func (a axis) xLabels(b *strings.Builder) {
	n := len(a.days)
	step := 1
	for _, s := range []int{1, 2, 3, 5, 7, 14, 28, 56, 91} {
		step = s
		if (a.slots()+s-1)/s <= 7 {
			break
		}
	}
	for i := n - 1; i >= 0; i -= step {
		x := a.x(i) + a.slotW()/2
		label := day(a.days[i].Day)
		if i == n-1 {
			label = "today"
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#8c959f"/>`, x, p2Bottom, x, p2Bottom+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s" text-anchor="middle" font-size="13">%s</text>`, x, p2Bottom+19, colourMuted, label)
	}
}

// sunsetMark draws the sunset: a dashed line at its day when the axis shows it, else an
// arrow at the edge it lies beyond.
func (a axis) sunsetMark(b *strings.Builder) {
	if a.sunset.IsZero() {
		return
	}
	first, last := a.days[0].Day, a.days[len(a.days)-1].Day.AddDate(0, 0, a.future)
	label := "sunset " + day(a.sunset)
	b.WriteString(`<g class="sunset">`)
	switch {
	case a.sunset.After(last):
		left := int(a.sunset.Sub(a.days[len(a.days)-1].Day) / (24 * time.Hour))
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s" text-anchor="end" font-weight="600">%s, in %d days →</text>`, chartRight, sunsetY, colourSunset, label, left)
	case a.sunset.Before(first):
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s" text-anchor="start" font-weight="600">← %s (passed)</text>`, chartLeft, sunsetY, colourSunset, label)
	default:
		x := a.x(int(a.sunset.Sub(first) / (24 * time.Hour)))
		anchor := "end"
		lx := x - 6
		if x < chartLeft+200 {
			anchor, lx = "start", x+6
		}
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`, x, sunsetY-12, x, p2Bottom, colourSunset)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s" text-anchor="%s" font-weight="600">%s</text>`, lx, sunsetY, colourSunset, anchor, label)
	}
	b.WriteString(`</g>`)
}
