// A minimal line chart written as SVG: axes with ticks, one polyline per series, a legend.
// Enough for reports of the simulator that people open in a browser; the dashboard uses a real
// charting library.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace corral::sim {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
};

struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
};

// Renders the series into an SVG document (800 × 500 px). Names are XML-escaped.
std::string RenderLinePlot(const PlotSpec& spec, const std::vector<PlotSeries>& series);

}  // namespace corral::sim
