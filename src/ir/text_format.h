// Pieces of the IR text format shared by the printer, the parser, the DOT dump and
// Abstract::str(): appending values to a string in the format's spelling, fast (no streams).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/node.h"

namespace kiln::ir::text {

/// dtype_name as a string_view (its length known: the printer and parser use it per node).
std::string_view dtype_text(DType dtype);

void append_int(std::string& out, int64_t v);
void append_uint(std::string& out, uint64_t v);
/// Shortest text that reads back to the same double; always has '.', 'e', "inf" or "nan", so
/// that it never reads back as an integer.
void append_double(std::string& out, double v);
/// Shortest text that reads back to the same float (a plain integer when it is one).
void append_float(std::string& out, float v);
/// A double-quoted string with C escapes for '"', '\\' and control bytes.
void append_quoted(std::string& out, std::string_view s);
/// "float32[2, 3]", with " weak" for a weak tensor.
void append_meta(std::string& out, const TensorMeta& meta);
/// append_meta, "(t1, t2)" for a tuple, "none" for nothing.
void append_abstract(std::string& out, const Abstract& abstract);
/// An attribute value (see kiln/ir/text.h for the spellings).
void append_attr_value(std::string& out, const AttrValue& value);
/// True when `s` can be written bare (an identifier, dots allowed, and not the keyword
/// `const`); other names are written quoted.
bool is_plain_name(std::string_view s);
/// "[1, 2.5, 3]": every element of a contiguous tensor with memory, row-major.
void append_elements(std::string& out, const Tensor& value);

}  // namespace kiln::ir::text
