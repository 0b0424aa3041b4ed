#include "sim/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace corral::sim {

namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 70, kRight = 170, kTop = 40, kBottom = 60;
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                               "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::string RenderLinePlot(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  double x0 = std::numeric_limits<double>::max(), x1 = std::numeric_limits<double>::lowest();
  double y0 = 0, y1 = std::numeric_limits<double>::lowest();
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(kWidth) +
                    "\" height=\"" + Num(kHeight) + "\" font-family=\"sans-serif\" " +
                    "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + Num(kWidth / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
         Escape(spec.title) + "</text>\n";
  svg += "<line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(kTop + ph) + "\" x2=\"" + Num(kLeft + pw) +
         "\" y2=\"" + Num(kTop + ph) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(kTop) + "\" x2=\"" + Num(kLeft) +
         "\" y2=\"" + Num(kTop + ph) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    double xv = x0 + (x1 - x0) * i / 5, yv = y0 + (y1 - y0) * i / 5;
    svg += "<text x=\"" + Num(px(xv)) + "\" y=\"" + Num(kTop + ph + 18) +
           "\" text-anchor=\"middle\">" + Num(xv) + "</text>\n";
    svg += "<text x=\"" + Num(kLeft - 6) + "\" y=\"" + Num(py(yv) + 4) + "\" text-anchor=\"end\">" +
           Num(yv) + "</text>\n";
    svg += "<line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(py(yv)) + "\" x2=\"" + Num(kLeft + pw) +
           "\" y2=\"" + Num(py(yv)) + "\" stroke=\"#ddd\"/>\n";
  }
  svg += "<text x=\"" + Num(kLeft + pw / 2) + "\" y=\"" + Num(kHeight - 15) +
         "\" text-anchor=\"middle\">" + Escape(spec.x_label) + "</text>\n";
  svg += "<text transform=\"translate(18," + Num(kTop + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + Escape(spec.y_label) + "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof kColors / sizeof *kColors)];
    std::string pts;
    for (const auto& [x, y] : series[i].points) pts += Num(px(x)) + "," + Num(py(y)) + " ";
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) +
           "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    svg += "<line x1=\"" + Num(kWidth - kRight + 15) + "\" y1=\"" + Num(ly) + "\" x2=\"" +
           Num(kWidth - kRight + 35) + "\" y2=\"" + Num(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + Num(kWidth - kRight + 40) + "\" y=\"" + Num(ly + 4) + "\">" +
           Escape(series[i].name) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace corral::sim
