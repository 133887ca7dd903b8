// `kloop report ID --html FILE`: one self-contained HTML page (inline CSS and SVG, no scripts,
// no external fonts or images) with the session's timeline (iterations along a time axis in
// seconds), per-candidate gate outcomes (with each iteration's duration and the candidate's
// sandbox), the roofline position of each candidate, speed-up per iteration with intervals and
// the stall-reason histogram, and the sealed holdout (table id "holdout", the data of `kloop
// show`'s holdout lines); a checker-coverage session adds its summary (pre id
// "checker-coverage"). Outcomes have one colour each, shown in a legend under the timeline and the
// gate grid (div ids "timeline-legend", "gates-legend"): passed, failed, timed out, crashed,
// infrastructure error, not run, pending device validation (never a failure colour), no candidate,
// not recorded; elements carry the outcome as a class ("iteration pending", "gate not_run",
// "swatch fail"). Stored text is HTML-escaped, invalid UTF-8 replaced by U+FFFD. Missing data is
// said in words ("no benchmark data (not run: no device)").
#pragma once

#include <string>
#include <string_view>

namespace kloop::store {

struct SessionDetail;

// The page for `d`. SVG ids: "timeline", "gates", "roofline", "speedup", "stalls"; a chart with no
// data is a <p class="missing" id="<id>-missing"> instead.
std::string render_html_report(const SessionDetail& d);

// `raw` escaped for HTML text and attribute values (<, >, &, "), invalid UTF-8 replaced by U+FFFD.
std::string html_escape(std::string_view raw);

} // namespace kloop::store
