// Terminal tables for the CLI's human output: a header row, a rule, and rows
// whose columns are padded to the widest cell. Widths count UTF-8 code
// points (the CLI prints no double-width characters).
// Thread-safety: a Table is a value; writing it does not modify it.
#ifndef PACER_CLI_TABLE_H_
#define PACER_CLI_TABLE_H_

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::cli {

// Code points in UTF-8 `text`.
std::size_t DisplayWidth(std::string_view text);

class Table {
 public:
  enum class Align { kLeft, kRight };

  // One column per header; `align` defaults to left for every column.
  explicit Table(std::vector<std::string> headers, std::vector<Align> align = {});

  // Missing cells print empty; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Every line starts with `indent`; columns are separated by two spaces and
  // lines carry no trailing blanks.
  void Write(std::ostream& out, std::string_view indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace pacer::cli

#endif  // PACER_CLI_TABLE_H_
