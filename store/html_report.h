// `kloop report ID --html FILE`: one self-contained HTML page (inline CSS and SVG, no scripts,
// no external fonts or images) with the session's timeline, per-iteration gate outcomes, the
// roofline position of each candidate, speed-up per iteration with intervals and the stall-reason
// histogram, and the sealed holdout (table id "holdout", the data of `kloop show`'s holdout
// lines). Stored text is HTML-escaped, invalid UTF-8 replaced by U+FFFD. Missing data is said in
// words ("no benchmark data (not run: no device)").
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
