#include "attncheck/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "attncheck/cases.hpp"
#include "attncheck/diagnosis.hpp"
#include "attncheck/finding_view.hpp"

namespace attncheck {
namespace {

// A heatmap shows at most kShownRows queries (finding_view.hpp) and this many columns (blocks of
// keys or output columns beyond it, each cell the block's largest value): 4096 keys as 4096 cells
// would be neither drawn nor read.
constexpr int64_t kShownColumns = 64;

std::string printed(const char* format, double x) {
  char text[64];
  std::snprintf(text, sizeof text, format, x);
  return text;
}

std::string esc(const std::string& text) { return markup_escaped(text); }

// matplotlib's Reds (D2L's show_heatmaps draws attention in it) and Blues, nine stops each.
using Stops = unsigned char[9][3];
constexpr Stops kReds = {{255, 245, 240}, {254, 224, 210}, {252, 187, 161}, {252, 146, 114}, {251, 106, 74},
                         {239, 59, 44},   {203, 24, 29},   {165, 15, 21},   {103, 0, 13}};
constexpr Stops kBlues = {{247, 251, 255}, {222, 235, 247}, {198, 219, 239}, {158, 202, 225}, {107, 174, 214},
                          {66, 146, 198},  {33, 113, 181},  {8, 81, 156},    {8, 48, 107}};

// The color at t in [0, 1] along `stops`, interpolated.
std::string ramp(const Stops& stops, double t) {
  t = std::clamp(t, 0.0, 1.0) * 8;
  const int at = std::min(int(t), 7);
  const double f = t - at;
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = int(std::lround(stops[at][c] + f * (stops[at + 1][c] - stops[at][c])));
  char color[8];
  std::snprintf(color, sizeof color, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return color;
}

constexpr const char* kGray = "#bdbdbd";

// How a heatmap's values become colors: each value a place on the color bar (0 its foot, 1 its
// top; NaN none: drawn gray), each place a color, and the bar's labels at their places.
struct Scale {
  std::function<double(double)> place;
  std::function<std::string(double)> color;
  std::vector<std::pair<double, std::string>> ticks;
  std::string gray;  // what gray means; empty when nothing is gray
  std::string note;  // how to read the colors, under the map; or empty
};

// One heatmap: rows are queries, columns keys or output columns.
struct Heatmap {
  std::string id, title, xlabel;
  std::vector<int64_t> rows;                         // the queries shown
  std::vector<std::pair<int64_t, int64_t>> columns;  // each column's first and last index
  std::vector<double> values = {};                   // [rows, columns]
  std::vector<std::string> tips = {};                // [rows, columns]: each cell's hover text
  int64_t marked = -1;                               // the failing query, outlined
  Scale scale = {};
};

// Columns for n indices: one each, or kShownColumns blocks.
std::vector<std::pair<int64_t, int64_t>> blocks(int64_t n) {
  const int64_t per = (n + kShownColumns - 1) / kShownColumns;
  std::vector<std::pair<int64_t, int64_t>> columns;
  for (int64_t first = 0; first < n; first += per) columns.push_back({first, std::min(n, first + per) - 1});
  return columns;
}

std::string range(const char* what, std::pair<int64_t, int64_t> column) {
  return column.first == column.second
             ? std::string(what) + " " + std::to_string(column.first)
             : std::string(what) + "s " + std::to_string(column.first) + "-" + std::to_string(column.second);
}

// The largest of `values` that are not NaN; NaN when all are.
double largest(const std::vector<double>& values) {
  double most = NAN;
  for (double x : values)
    if (!std::isnan(x) && !(x <= most)) most = x;
  return most;
}

// The heatmap as inline SVG: cells with their hover text (<title>, no script), axes labelled with
// indices, the failing query outlined, and the color bar with its labels beside.
std::string svg(const Heatmap& m) {
  const double rows = double(m.rows.size()), columns = double(m.columns.size());
  // Three maps side by side in 1150 px, cells as wide and as tall as each axis allows (one query
  // over 300 keys is a strip, not a line), in whole pixels (crisp cells at fractional places leave
  // white seams); the bar stands clear of the x axis's label however narrow the map, and at least
  // 120 px tall.
  const double cell_width = std::floor(std::clamp(220 / columns, 3.0, 40.0));
  const double cell_height = std::floor(std::clamp(220 / rows, 3.0, 40.0));
  const double left = 40, top = 6, width = columns * cell_width, height = rows * cell_height;
  const double bar_x = left + std::max(width, 110.0) + 14, bar_height = std::max(height, 120.0);
  const double total_width = bar_x + 14 + 76, total_height = top + std::max(height + 44, bar_height + 12);
  std::ostringstream s;
  s << "<svg class=\"heatmap\" id=\"" << m.id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << total_width
    << "\" height=\"" << total_height << "\" viewBox=\"0 0 " << total_width << ' ' << total_height
    << "\" font-family=\"sans-serif\" font-size=\"10\">\n<g shape-rendering=\"crispEdges\">\n";
  for (size_t r = 0; r < m.rows.size(); ++r)
    for (size_t c = 0; c < m.columns.size(); ++c) {
      const double value = m.values[r * m.columns.size() + c];
      const std::string fill = std::isnan(value) ? kGray : m.scale.color(m.scale.place(value));
      s << "<rect class=\"cell\" x=\"" << left + double(c) * cell_width << "\" y=\"" << top + double(r) * cell_height
        << "\" width=\"" << cell_width << "\" height=\"" << cell_height << "\" fill=\"" << fill << "\"><title>"
        << esc(m.tips[r * m.columns.size() + c]) << "</title></rect>\n";
    }
  s << "</g>\n";
  for (size_t r = 0; r < m.rows.size(); ++r)
    if (m.rows[r] == m.marked)
      s << "<rect x=\"" << left - 1 << "\" y=\"" << top + double(r) * cell_height - 1 << "\" width=\"" << width + 2
        << "\" height=\"" << cell_height + 2 << "\" fill=\"none\" stroke=\"#000\" stroke-width=\"1.5\"/>\n";
  // Index labels at least 12 px apart down, 28 px across.
  const size_t row_step = size_t(std::ceil(12 / cell_height)), column_step = size_t(std::ceil(28 / cell_width));
  for (size_t r = 0; r < m.rows.size(); r += row_step)
    s << "<text x=\"" << left - 4 << "\" y=\"" << top + (double(r) + 0.5) * cell_height + 3.5 << "\" text-anchor=\"end\">"
      << m.rows[r] << "</text>\n";
  for (size_t c = 0; c < m.columns.size(); c += column_step)
    s << "<text x=\"" << left + (double(c) + 0.5) * cell_width << "\" y=\"" << top + height + 12 << "\" text-anchor=\"middle\">"
      << m.columns[c].first << "</text>\n";
  s << "<text x=\"" << left + std::max(width, 110.0) / 2 << "\" y=\"" << top + height + 30
    << "\" text-anchor=\"middle\" font-size=\"12\">" << esc(m.xlabel) << "</text>\n";
  s << "<text transform=\"translate(10," << top + std::max(height, 50.0) / 2
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">"
       "Queries</text>\n";
  // The color bar: 64 bands from its foot (place 0) to its top (place 1).
  s << "<g class=\"legend\" shape-rendering=\"crispEdges\">\n";
  for (int band = 0; band < 64; ++band)
    s << "<rect x=\"" << bar_x << "\" y=\"" << top + bar_height * (63 - band) / 64 << "\" width=\"14\" height=\""
      << bar_height / 64 + 0.5 << "\" fill=\"" << m.scale.color((band + 0.5) / 64) << "\"/>\n";
  s << "</g>\n<rect x=\"" << bar_x << "\" y=\"" << top << "\" width=\"14\" height=\"" << bar_height
    << "\" fill=\"none\" stroke=\"#666\"/>\n";
  for (const auto& [place, label] : m.scale.ticks)
    s << "<text x=\"" << bar_x + 18 << "\" y=\"" << top + bar_height * (1 - place) + 3.5 << "\">" << esc(label) << "</text>\n";
  return s.str() + "</svg>";
}

std::string figure(const Heatmap& m) {
  const bool any_gray = std::any_of(m.values.begin(), m.values.end(), [](double x) { return std::isnan(x); });
  std::string gray =
      !any_gray ? "" : "<span class=\"swatch\" style=\"background:" + std::string(kGray) + "\"></span> " + esc(m.scale.gray);
  return "<figure><figcaption>" + esc(m.title) + "</figcaption>\n" + svg(m) + "\n<div class=\"note\">" + esc(m.scale.note) +
         (m.scale.note.empty() || gray.empty() ? "" : "<br>") + gray + "</div></figure>\n";
}

// A table of values, rows by columns, each row labelled, the columns by `headers` or else numbered.
std::string table(const std::string& caption, int64_t rows, int64_t columns, const std::function<int64_t(int64_t)>& row_label,
                  const std::function<std::string(int64_t, int64_t)>& cell, const std::vector<std::string>& headers = {}) {
  std::string html = "<div class=\"tensor\"><table><caption>" + esc(caption) + "</caption>\n<tr><th></th>";
  for (int64_t c = 0; c < columns; ++c)
    html += "<th>" + (headers.empty() ? std::to_string(c) : esc(headers[size_t(c)])) + "</th>";
  html += "</tr>\n";
  for (int64_t r = 0; r < rows; ++r) {
    html += "<tr><th>" + std::to_string(row_label(r)) + "</th>";
    for (int64_t c = 0; c < columns; ++c) html += "<td>" + esc(cell(r, c)) + "</td>";
    html += "</tr>\n";
  }
  return html + "</table></div>\n";
}

// A tensor's spread (finding_view.hpp) as a row of the spreads' table: its values, least and
// largest finite (blank when none is), how many are NaN or infinite.
std::string spread_row(const Spread& x) {
  return "<tr><td>" + x.name + "</td><td>" + x.shape + "</td><td>" + std::to_string(x.values) + "</td><td>" +
         (x.low <= x.high ? show(x.low) : "") + "</td><td>" + (x.low <= x.high ? show(x.high) : "") + "</td><td>" +
         std::to_string(x.nans) + "</td><td>" + std::to_string(x.infinities) + "</td></tr>\n";
}

std::string listed(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& value : values) text += (text.empty() ? "" : " ") + value;
  return text;
}

// Values as the page prints them (show), in a row: a q [dk], k [dk] or v [dv] row.
std::string listed(const std::vector<double>& values) {
  std::vector<std::string> shown;
  for (double x : values) shown.push_back(show(x));
  return listed(shown);
}

// "[x,y]": a batch and a head, as an index into a tensor.
std::string index_pair(int64_t x, int64_t y) { return "[" + std::to_string(x) + "," + std::to_string(y) + "]"; }

// A finding's three heatmaps of its slice.
struct Maps {
  Heatmap mask, weight, error;
};

// The cells of the permitted keys and of the exact weights: the slice's permitted and weights
// [rows][Tk] in, a block of keys a cell.
void fill_key_cells(const SliceView& slice, Maps& maps) {
  for (size_t r = 0; r < slice.rows.size(); ++r) {
    const std::string query = "query " + std::to_string(slice.rows[r]) + ", ";
    const std::vector<double>& weights = slice.weights[r];
    for (const auto& keys : maps.mask.columns) {
      int64_t permitted = 0;
      for (int64_t j = keys.first; j <= keys.second; ++j) permitted += slice.permitted[r][size_t(j)];
      const int64_t n = keys.second - keys.first + 1;
      maps.mask.values.push_back(double(permitted) / double(n));
      maps.mask.tips.push_back(query + range("key", keys) + ": " +
                               (n == 1 ? (permitted ? "permitted" : "forbidden")
                                       : std::to_string(permitted) + " of " + std::to_string(n) + " permitted"));
      maps.weight.values.push_back(largest({weights.begin() + keys.first, weights.begin() + keys.second + 1}));
      maps.weight.tips.push_back(query + range("key", keys) + ": " + (n == 1 ? "weight " : "largest weight ") +
                                 show(maps.weight.values.back()));
    }
  }
}

// The cells of the output's error/bound: the slice's out, exact, bound and error/bound [rows][dv]
// in, a block of output columns a cell.
void fill_error_cells(const SliceView& slice, Heatmap& error) {
  const int64_t b = slice.b, h = slice.h;
  for (size_t r = 0; r < slice.rows.size(); ++r)
    for (const auto& cols : error.columns) {
      error.values.push_back(largest({slice.ratio[r].begin() + cols.first, slice.ratio[r].begin() + cols.second + 1}));
      const int64_t col = cols.first;
      const std::string at = "out[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(slice.rows[r]) + "," +
                             std::to_string(col) + (cols.second > col ? "-" + std::to_string(cols.second) : "") + "]: ";
      error.tips.push_back(at + (cols.second > col
                                     ? "largest error/bound " + show(error.values.back())
                                     : "computed " + show(slice.out[r][size_t(col)]) + ", exact " +
                                           printed("%.17g", double(slice.exact[r][size_t(col)])) + ", bound " +
                                           show(slice.bound[r][size_t(col)]) + ", error/bound " + show(error.values.back())));
    }
}

// The slice's heatmaps: (a) the permitted keys, (b) the exact weights [rows][Tk], (c) the output's
// error/bound [rows][dv] (empty without an out); `suffix` ends their ids.
Maps heatmaps(const ProblemView& p, const std::string& suffix) {
  const Shape& s = p.shape;
  const SliceView& slice = p.slice;
  double heaviest = 0;  // the weights' color bar tops at the heaviest finite weight
  for (const std::vector<double>& row : slice.weights)
    for (double w : row)
      if (std::isfinite(w)) heaviest = std::max(heaviest, w);
  if (heaviest == 0) heaviest = 1;
  const std::string& where = slice.where;
  Maps maps{
      {"heatmap-mask" + suffix, "(a) Permitted keys, " + where, "Keys", slice.rows, blocks(s.Tk)},
      {"heatmap-weights" + suffix, "(b) Exact attention weights, " + where, "Keys", slice.rows, blocks(s.Tk)},
      {"heatmap-error" + suffix, "(c) Error/bound of the output, " + where, "Output columns (dv)", slice.rows, blocks(s.dv)}};
  maps.mask.scale = {
      [](double x) { return x; }, [](double t) { return ramp(kReds, t); }, {{0, "forbidden"}, {1, "permitted"}}, "", ""};
  maps.weight.scale = {[=](double x) { return x / heaviest; },
                       [](double t) { return ramp(kReds, t); },
                       {{0, "0"}, {0.5, printed("%.3g", heaviest / 2)}, {1, printed("%.3g", heaviest)}},
                       "NaN",
                       ""};
  // Within the bound in blues up to 1, outside it in reds on a log scale up to 1e6.
  maps.error.scale = {[](double x) { return x <= 1 ? x / 2 : 0.5 + 0.5 * std::min(1.0, std::log10(x) / 6); },
                      [](double t) { return t <= 0.5 ? ramp(kBlues, 1.5 * t) : ramp(kReds, 0.3 + 1.4 * (t - 0.5)); },
                      {{0, "0"}, {0.25, "0.5"}, {0.5, "1: the bound"}, {0.75, "1e3"}, {1, "1e6 or more"}},
                      "outside the format's range: not checked",
                      "Blue: within the bound. Red: outside it; darkest: 1e6 or more, or a wrong NaN or infinity."};
  for (Heatmap* m : {&maps.mask, &maps.weight, &maps.error}) m->marked = slice.i;
  fill_key_cells(slice, maps);
  if (slice.have_out) fill_error_cells(slice, maps.error);
  return maps;
}

// What the section shows and why, then the heatmaps (of the slice's rows of Tq, keys of Tk and columns of dv).
std::string maps_shown(const FindingView& f, const ProblemView& p, const Maps& maps) {
  const Shape& s = p.shape;
  const SliceView& slice = p.slice;
  const std::string query = std::to_string(slice.i);
  std::string html =
      "<p>The problem shown (" + esc(f.which) + "): " + esc(p.described) + ".</p>\n<p>The slice shown: " + slice.where;
  html += slice.have_out
              ? (slice.all_within ? ", the row where the kernel is least accurate (query " + query +
                                        "). On this case the kernel's output is within the bound everywhere: the report below "
                                        "says what failed (imprecision, or a related problem the property builds from the case)."
                                  : ", and the first query with an element outside the bound (query " + query + ", outlined).")
              : ". The implementation " + esc(f.fault) + " on this case: no output to compare.";
  if (slice.rows.size() < size_t(s.Tq))
    html += " Queries " + std::to_string(slice.rows.front()) + " to " + std::to_string(slice.rows.back()) + " of " +
            std::to_string(s.Tq) + ".";
  if (maps.mask.columns.size() < size_t(s.Tk) || maps.error.columns.size() < size_t(s.dv))
    html += " A cell stands for a block of keys or columns: the share permitted, the largest weight, the largest error/bound.";
  return html + " Hover over a cell for its values.</p>\n<div class=\"maps\">\n" + figure(maps.mask) + figure(maps.weight) +
         (slice.have_out ? figure(maps.error) : "") + "</div>\n";
}

// x [B,heads,n,d] in full: a table per (b, head), side by side.
std::string tables(const char* name, const char* shape, const std::vector<double>& x, int64_t B, int64_t heads, int64_t n,
                   int64_t d) {
  std::string html = "<h3>" + std::string(name) + " " + shape + "</h3>\n<div class=\"tensors\">\n";
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t hh = 0; hh < heads; ++hh)
      html += table(
          std::string(name) + "[" + std::to_string(bb) + "," + std::to_string(hh) + "]", n, d, [](int64_t r) { return r; },
          [&](int64_t r, int64_t col) { return show(x[size_t(((bb * heads + hh) * n + r) * d + col)]); });
  return html + "</div>\n";
}

// A small case's tensors in full (q [B,H,Tq,dk], k [B,H_kv,Tk,dk], v [B,H_kv,Tk,dv],
// bias [B,H,Tq,Tk], allow [B,Tq,Tk]), and the out of the queries shown [rows][dv] beside the exact
// one and the bound.
std::string tensors_in_full(const ProblemView& p) {
  const Shape& s = p.shape;
  const SliceView& slice = p.slice;
  std::string html = tables("q", "[B,H,Tq,dk]", p.q, s.B, s.H, s.Tq, s.dk) +
                     tables("k", "[B,H_kv,Tk,dk]", p.k, s.B, s.kv_heads(), s.Tk, s.dk) +
                     tables("v", "[B,H_kv,Tk,dv]", p.v, s.B, s.kv_heads(), s.Tk, s.dv);
  if (!p.bias.empty()) html += tables("bias", "[B,H,Tq,Tk]", p.bias, s.B, s.H, s.Tq, s.Tk);
  if (!p.allow.empty()) {
    html += "<h3>allow [B,Tq,Tk]</h3>\n<div class=\"tensors\">\n";
    for (int64_t bb = 0; bb < s.B; ++bb)
      html += table(
          "allow[" + std::to_string(bb) + "]", s.Tq, s.Tk, [](int64_t r) { return r; },
          [&](int64_t r, int64_t j) { return std::to_string(int(p.allow[size_t(s.allow_at(bb, r) + j)] != 0)); });
    html += "</div>\n";
  }
  if (slice.have_out) {
    const std::string bh = index_pair(slice.b, slice.h);
    html += "<h3>out" + bh + ", the queries shown: computed, exact, bound</h3>\n<div class=\"tensors\">\n";
    auto shown = [&](int64_t r) { return slice.rows[size_t(r)]; };
    const int64_t n = int64_t(slice.rows.size());
    html += table("computed out" + bh, n, s.dv, shown,
                  [&](int64_t r, int64_t col) { return show(slice.out[size_t(r)][size_t(col)]); });
    html += table("exact out" + bh, n, s.dv, shown,
                  [&](int64_t r, int64_t col) { return printed("%.17g", double(slice.exact[size_t(r)][size_t(col)])); });
    html +=
        table("bound" + bh, n, s.dv, shown, [&](int64_t r, int64_t col) { return show(slice.bound[size_t(r)][size_t(col)]); });
    html += "</div>\n";
  }
  return html;
}

// A large case's tensors as each one's range: its values, least and largest finite, NaNs and infinities.
std::string tensor_spreads(const ProblemView& p) {
  std::string html =
      "<table class=\"spread\"><tr><th>tensor</th><th>shape</th><th>values</th><th>least finite</th><th>largest "
      "finite</th><th>NaN</th><th>infinite</th></tr>\n";
  for (const Spread& x : p.spreads) html += spread_row(x);
  return html + "</table>\n";
}

// A large case's failing row: its query q[b,h,i] [dk], its out [dv] beside the exact one, and the
// keys that weigh most in it with their k [dk] and v [dv].
std::string failing_row(const ProblemView& p) {
  const Shape& s = p.shape;
  const SliceView& slice = p.slice;
  const int64_t b = slice.b, h = slice.h, i = slice.i;
  const std::string kv = index_pair(b, s.kv_head(h)), bh = index_pair(b, h);
  const size_t at = size_t(i - slice.rows.front());
  std::string html = "<h3>The failing row: query " + std::to_string(i) + " of " + slice.where + "</h3>\n<p>q" + bh + "[" +
                     std::to_string(i) + "]:</p><pre>" + esc(listed(p.failing_q)) + "</pre>\n";
  if (slice.have_out)
    html += table(
        "out" + bh + "[" + std::to_string(i) + "], by column of dv", s.dv, 4, [](int64_t r) { return r; },
        [&](int64_t col, int64_t what) {
          const size_t c = size_t(col);
          const std::vector<double> shown = {slice.out[at][c], double(slice.exact[at][c]), slice.bound[at][c],
                                             slice.ratio[at][c]};
          return what == 1 ? printed("%.17g", shown[1]) : show(shown[size_t(what)]);
        },
        {"computed", "exact", "bound", "error/bound"});
  html += "<p>The keys of most weight in the row: " + std::to_string(p.heaviest.size()) + " of the " +
          std::to_string(p.weighing_keys) + " that carry any.</p>\n<pre>";
  for (const HeavyKey& key : p.heaviest) {
    const std::string j = std::to_string(key.j);
    html += esc("key " + j + ", weight " + show(key.weight) + "\n  k" + kv + "[" + j + "]: " + listed(key.k) + "\n  v" + kv +
                "[" + j + "]: " + listed(key.v) + "\n");
  }
  return html + "</pre>\n";
}

// The finding's problem: the three heatmaps of its failing (b, h) slice, and its tensors; `suffix`
// ends the heatmaps' ids.
std::string case_section(const FindingView& f, const ProblemView& p, const std::string& suffix) {
  std::string html = maps_shown(f, p, heatmaps(p, suffix));
  // The tensors: a small case in full, a large one as each tensor's range and the failing row's values.
  html += "<h2>The problem's tensors</h2>\n";
  html += p.in_full ? tensors_in_full(p) : tensor_spreads(p) + failing_row(p);
  if (!p.key_lengths.empty()) {
    std::vector<std::string> lengths;
    for (int32_t n : p.key_lengths) lengths.push_back(std::to_string(n));
    html += "<p>key lengths [B]: " + esc(listed(lengths)) + "</p>\n";
  }
  return html;
}

const char* kStyle = R"(body { font-family: sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 22px 0 6px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 14px 0 4px; }
.pass { color: #1a7f37; } .fail { color: #c00; }
p { margin: 4px 0; max-width: 1150px; }
pre { background: #f6f8fa; padding: 6px 8px; overflow-x: auto; font-size: 12px; max-width: 1150px; }
.maps { display: flex; flex-wrap: wrap; gap: 8px 16px; margin: 8px 0; }
figure { margin: 0; }
figcaption { font-size: 13px; font-weight: bold; margin-bottom: 4px; }
.note { font-size: 11px; color: #555; max-width: 340px; }
.swatch { display: inline-block; width: 10px; height: 10px; border: 1px solid #666; vertical-align: middle; }
table { border-collapse: collapse; font-size: 12px; margin: 4px 0 10px; }
td, th { border: 1px solid #ccc; padding: 1px 6px; text-align: right; }
th { background: #f0f0f0; }
caption { text-align: left; font-weight: bold; padding: 2px 0; }
.tensors { display: flex; flex-wrap: wrap; gap: 0 16px; align-items: flex-start; }
.tensor { overflow-x: auto; max-width: 1150px; }
.tensor td { font-family: monospace; }
tr.failed td { background: #fde0dd; }
td.name { text-align: left; }
)";

}  // namespace

std::string markup_escaped(const std::string& text) {
  std::string escaped;
  for (size_t at = 0; at < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[at]);
    // A well-formed UTF-8 sequence's length and code point, or n = 0.
    size_t n = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    uint32_t point = n == 1 ? lead : n == 2 ? lead & 0x1f : n == 3 ? lead & 0x0f : lead & 0x07;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char next = at + k < text.size() ? static_cast<unsigned char>(text[at + k]) : 0;
      if ((next >> 6) != 2) {
        n = 0;
        break;
      }
      point = point << 6 | (next & 0x3f);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    const bool allowed = n > 0 && point >= least[n] && point <= 0x10ffff && !(point >= 0xd800 && point <= 0xdfff) &&
                         point != 0xfffe && point != 0xffff && (point >= 0x20 || point == '\t' || point == '\n' || point == '\r');
    if (!allowed) {
      escaped += "\xef\xbf\xbd";  // U+FFFD
      at += std::max<size_t>(n, 1);
      continue;
    }
    switch (lead) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped.append(text, at, n);
    }
    at += n;
  }
  return escaped;
}

namespace {

// With more than one finding (--keep-going), the index: each finding at a glance, linked to its
// section.
std::string findings_index(const CampaignResult& result) {
  std::string html = "<h2>Findings: " + std::to_string(result.findings.size()) +
                     "</h2>\n<table id=\"findings\"><tr><th>finding</th><th>kind</th><th class=\"name\">property</th>"
                     "<th>shrunk to</th><th>error/bound</th><th class=\"name\">fails only with</th></tr>\n";
  for (size_t n = 0; n < result.findings.size(); ++n) {
    const Finding& f = result.findings[n];
    std::string needs;
    for (const std::string& feature : f.diagnosis.needs) needs += (needs.empty() ? "" : ", ") + feature;
    html += "<tr><td><a href=\"#finding-" + std::to_string(n + 1) + "\">" + std::to_string(n + 1) + "</a></td><td>" +
            esc(f.kind) + "</td><td class=\"name\">Property." + esc(f.property) + "</td><td>" +
            esc(f.diagnosis.shape.empty() ? case_note(f) : f.diagnosis.shape) + "</td><td>" + printed("%.3g", f.ratio) +
            "</td><td class=\"name\">" + esc(needs) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

// Finding n: what broke, how to replay it, the heatmaps of its failed call and its report. The
// first finding's ids are the page's plain ones (#replay, #heatmap-mask, ...), a later one's end in -n.
std::string finding_section(const CampaignResult& result, size_t n, const FindingView& view, const std::string& replay) {
  const Finding& f = result.findings[n];
  const std::string suffix = n == 0 ? "" : "-" + std::to_string(n + 1);
  std::string html = "<h2 id=\"finding-" + std::to_string(n + 1) + "\">" +
                     (result.findings.size() > 1 ? "Finding " + std::to_string(n + 1) + " (" + esc(f.kind) + "): " : "") +
                     "Counterexample to Property." + esc(f.property) +
                     (result.replayed ? "" : std::string(" (") + case_note(f) + ")") + "</h2>\n";
  html += "<p>" + esc(f.message.substr(0, f.message.find('\n'))) + "</p>\n";
  if (const std::string said = diagnosis_text(f.diagnosis); !said.empty())
    html += "<pre class=\"diagnosis\">" + esc(said) + "</pre>\n";
  if (!replay.empty()) html += "<p>Replay it:</p>\n<pre id=\"replay" + suffix + "\">" + esc(replay) + "</pre>\n";
  if (!view.problem) {
    html += "<p>Property." + esc(f.property) + " ran the kernel on no case: no heatmaps.</p>\n";
  } else {
    if (f.case_text.empty()) html += "<p>Property." + esc(f.property) + " builds its own cases.</p>\n";
    html += case_section(view, *view.problem, suffix);
  }
  return html + "<h2>The failure report</h2>\n<pre id=\"report" + suffix + "\">" + esc(f.message) + "</pre>\n";
}

}  // namespace

void write_html_report(const std::string& path, const CampaignOptions& options, const CampaignResult& result,
                       const std::vector<FindingView>& views, const ReportText& text) {
  const bool pass = text.verdict == "PASS";
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>attncheck check: " + esc(text.verdict) +
      (result.found ? ": Property." + esc(result.finding.property) : "") + "</title>\n<style>\n" + kStyle +
      "</style>\n</head>\n<body>\n";
  html += "<h1>attncheck check: <span class=\"" + std::string(pass ? "pass" : "fail") + "\" id=\"verdict\">" + esc(text.verdict) +
          "</span></h1>\n<p>" + esc((options.command ? "--impl-cmd " : "--impl ") + options.impl) + "</p>\n<p>" +
          esc(text.summary) + "</p>\n<p>" + esc(text.checked) + "</p>\n";
  if (!result.fp_mode.empty()) html += "<p class=\"fail\">floating-point mode: " + esc(result.fp_mode) + "</p>\n";
  if (result.found) {
    if (result.findings.size() > 1) html += findings_index(result);
    for (size_t n = 0; n < result.findings.size(); ++n)
      html += finding_section(result, n, views.at(n), n < text.replays.size() ? text.replays[n] : "");
  } else {
    html += "<p>No counterexample: every property below ran against the implementation";
    html += result.replayed ? " on the replayed case, which no longer fails.</p>\n"
                            : ", round after round with fresh seeds, until the budget of " + printed("%g", options.seconds) +
                                  " s ran out.</p>\n";
  }
  html +=
      "<h2>Properties</h2>\n<table id=\"properties\"><tr><th class=\"name\">property</th><th>cases</th><th>seconds</th></tr>\n";
  for (const auto& [name, cases] : result.per_property) {
    const auto seconds = result.per_property_seconds.find(name);
    bool failed = false;
    for (const Finding& f : result.findings) failed = failed || f.property == name;
    html += std::string(failed ? "<tr class=\"failed\">" : "<tr>") + "<td class=\"name\">" + esc(name) + "</td><td>" +
            std::to_string(cases) + "</td><td>" +
            printed("%.3f", seconds == result.per_property_seconds.end() ? 0.0 : seconds->second) + "</td></tr>\n";
  }
  html += "<tr><th class=\"name\">all</th><th>" + std::to_string(result.cases) + "</th><th>" + printed("%.3f", result.seconds) +
          "</th></tr>\n</table>\n</body>\n</html>\n";
  std::ofstream file(path);
  file << html;
  if (!file) throw std::runtime_error(path + ": cannot write the HTML report");
}

}  // namespace attncheck
