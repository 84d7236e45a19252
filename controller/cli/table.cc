#include "cli/table.h"

#include <algorithm>
#include <utility>

namespace pacer::cli {

std::size_t DisplayWidth(std::string_view text) {
  // Count bytes that do not continue a multi-byte sequence (10xxxxxx).
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

Table::Table(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
  align_.resize(headers_.size(), Align::kLeft);
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::Write(std::ostream& out, std::string_view indent) const {
  std::vector<std::size_t> width(headers_.size(), 0);
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = DisplayWidth(headers_[c]);
    for (const auto& row : rows_) width[c] = std::max(width[c], DisplayWidth(row[c]));
  }
  auto write_line = [&](const std::vector<std::string>& cells) {
    std::string line(indent);
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::size_t pad = width[c] - DisplayWidth(cells[c]);
      if (c > 0) line += "  ";
      if (align_[c] == Align::kRight) line.append(pad, ' ');
      line += cells[c];
      if (align_[c] == Align::kLeft) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  write_line(headers_);
  std::vector<std::string> rule;
  for (std::size_t w : width) rule.emplace_back(w, '-');
  write_line(rule);
  for (const auto& row : rows_) write_line(row);
}

}  // namespace pacer::cli
