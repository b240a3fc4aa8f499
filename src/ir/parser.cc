// ir::parse: a hand-written recursive-descent reader of the format in kiln/ir/text.h. It reads
// the text in place (string_views, std::from_chars), so a million-node graph parses in a fraction
// of a second; the grammar nests only inside one statement, so nothing recurses over the graph.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "ir/infer.h"
#include "ir/ir_access.h"
#include "ir/node_arena.h"
#include "ir/text_format.h"
#include "kiln/ir/text.h"

namespace kiln::ir {

namespace {

// Character classes by table: the lexer asks per character.
enum : uint8_t { kIdentStart = 1, kIdentChar = 2, kSpace = 4 };
constexpr std::array<uint8_t, 256> kCharClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool start = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool rest = start || (c >= '0' && c <= '9') || c == '.';
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '#';
    t[static_cast<size_t>(c)] = static_cast<uint8_t>(
        (start ? kIdentStart : 0) | (rest ? kIdentChar : 0) | (space ? kSpace : 0));
  }
  return t;
}();
bool is_ident_start(char c) { return kCharClass[static_cast<unsigned char>(c)] & kIdentStart; }
bool is_ident_char(char c) { return kCharClass[static_cast<unsigned char>(c)] & kIdentChar; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  FuncGraphPtr parse_graph();

 private:
  // --- errors ---
  [[noreturn]] void fail_at(size_t pos, const std::string& message) const;
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }
  std::string found() const;

  // --- lexing ---
  /// Skips whitespace and comments (inline: most tokens have none before them).
  void skip_space() {
    if (pos_ < text_.size() && (kCharClass[static_cast<unsigned char>(text_[pos_])] & kSpace)) {
      skip_space_slow();
    }
  }
  void skip_space_slow();
  bool at(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool accept(char c) {
    if (!at(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char* context) {
    if (!accept(c)) fail(std::string("expected '") + c + "' " + context + ", found " + found());
  }
  /// An identifier, or empty when the next token is not one.
  std::string_view ident();
  bool accept_keyword(std::string_view keyword);
  std::string quoted();
  /// An identifier or a quoted string (names of ops and attributes).
  std::string name(const char* what);
  /// The characters of a number (sign, digits, '.', exponent, inf, nan).
  std::string_view number_token();
  int64_t integer(const char* what);
  uint64_t node_id();

  // --- grammar ---
  DType dtype();
  TensorMeta tensor_type();
  Abstract type();
  AttrValue attr_value();
  Scalar scalar();
  Tensor constant(const TensorMeta& meta);
  NodePtr reference();
  void define(uint64_t id, size_t pos, const NodePtr& node);
  void parse_statement(FuncGraph& g);

  std::string_view text_;
  size_t pos_ = 0;
  // Nodes by id: a table for ids below the text's length (what the printer writes), a map for
  // the rest, so a stray huge id costs no huge table.
  std::vector<Node*> dense_;
  std::unordered_map<uint64_t, Node*> sparse_;
  FuncGraph* graph_ = nullptr;
  std::vector<NodePtr> inputs_;  // of the node being read; reused, so it allocates once
};

void Parser::fail_at(size_t pos, const std::string& message) const {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  KILN_FAIL(kValue) << "line " << line << ", column " << pos - line_start + 1 << ": " << message;
}

std::string Parser::found() const {
  if (pos_ >= text_.size()) return "the end of the text";
  size_t end = pos_ + 1;
  if (is_ident_char(text_[pos_])) {
    while (end < text_.size() && is_ident_char(text_[end])) ++end;
  }
  return "'" + std::string(text_.substr(pos_, std::min<size_t>(end - pos_, 32))) + "'";
}

void Parser::skip_space_slow() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

std::string_view Parser::ident() {
  skip_space();
  const size_t start = pos_;
  if (pos_ >= text_.size() || !is_ident_start(text_[pos_])) return {};
  while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
  return text_.substr(start, pos_ - start);
}

bool Parser::accept_keyword(std::string_view keyword) {
  skip_space();
  const size_t start = pos_;
  if (ident() == keyword) return true;
  pos_ = start;
  return false;
}

std::string Parser::quoted() {
  const size_t start = pos_;
  expect('"', "to start a string");
  std::string s;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n') fail_at(start, "unterminated string");
    const char c = text_[pos_++];
    if (c == '"') return s;
    if (c != '\\') {
      s += c;
      continue;
    }
    if (pos_ >= text_.size()) fail_at(start, "unterminated string");
    const char e = text_[pos_++];
    if (e == 'n') {
      s += '\n';
    } else if (e == 't') {
      s += '\t';
    } else if (e == '"' || e == '\\') {
      s += e;
    } else if (e == 'x') {
      unsigned value = 0;
      const char* first = text_.data() + pos_;
      const char* last = first + std::min<size_t>(2, text_.size() - pos_);
      const auto r = std::from_chars(first, last, value, 16);
      if (r.ptr != last || last - first != 2) fail("expected two hex digits after \\x");
      pos_ += 2;
      s += static_cast<char>(value);
    } else {
      fail_at(pos_ - 2, std::string("unknown escape '\\") + e + "' in a string");
    }
  }
}

std::string Parser::name(const char* what) {
  if (at('"')) return quoted();
  const std::string_view id = ident();
  if (id.empty()) fail(std::string("expected ") + what + ", found " + found());
  return std::string(id);
}

std::string_view Parser::number_token() {
  skip_space();
  const size_t start = pos_;
  if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    const bool exponent_sign =
        (c == '-' || c == '+') && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
    if (!((c >= '0' && c <= '9') || c == '.' || is_ident_start(c) || exponent_sign)) break;
    ++pos_;
  }
  return text_.substr(start, pos_ - start);
}

int64_t Parser::integer(const char* what) {
  skip_space();
  const size_t start = pos_;
  const std::string_view tok = number_token();
  int64_t v = 0;
  const char* first = tok.data() + (!tok.empty() && tok[0] == '+' ? 1 : 0);
  const auto r = std::from_chars(first, tok.data() + tok.size(), v);
  if (tok.empty() || r.ec != std::errc() || r.ptr != tok.data() + tok.size()) {
    pos_ = start;
    fail(std::string("expected ") + what + " (an integer), found " + found());
  }
  return v;
}

uint64_t Parser::node_id() {
  skip_space();
  const size_t start = pos_;
  expect('%', "before a node id");
  uint64_t id = 0;
  const auto r = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), id);
  if (r.ec != std::errc() || r.ptr == text_.data() + pos_) {
    fail_at(start, "expected a node id such as %3, found " + found());
  }
  pos_ = static_cast<size_t>(r.ptr - text_.data());
  if (id == Node::kReturnId) fail_at(start, "node id " + std::to_string(id) + " is reserved");
  return id;
}

DType Parser::dtype() {
  skip_space();
  const size_t start = pos_;
  static const auto names = [] {
    std::array<std::string_view, kNumDTypes> n;
    for (int d = 0; d < kNumDTypes; ++d)
      n[static_cast<size_t>(d)] = text::dtype_text(static_cast<DType>(d));
    return n;
  }();
  const std::string_view id = ident();
  for (size_t d = 0; d < names.size(); ++d) {
    if (id == names[d]) return static_cast<DType>(d);
  }
  pos_ = start;
  fail("expected a dtype (float32, int64, ...), found " + found());
}

TensorMeta Parser::tensor_type() {
  TensorMeta meta;
  meta.dtype = dtype();
  const size_t shape_start = pos_;
  expect('[', "to start a shape");
  if (!accept(']')) {
    do {
      const size_t start = pos_;
      const int64_t d = integer("a dimension");
      if (d < 0) fail_at(start, "a dimension may not be negative");
      meta.shape.push_back(d);
    } while (accept(','));
    expect(']', "to end a shape");
    // The sizes are non-negative by now: kiln::checked_nbytes can only refuse the byte count.
    try {
      checked_nbytes(meta.shape, meta.dtype, "shape");
    } catch (const Error&) {
      fail_at(shape_start,
              "a " + std::string(dtype_name(meta.dtype)) + " shape of more than 2^63 - 1 bytes");
    }
  }
  meta.weak = accept_keyword("weak");
  return meta;
}

Abstract Parser::type() {
  if (!accept('(')) return Abstract(tensor_type());
  std::vector<TensorMeta> elements;
  if (!accept(')')) {
    do {
      elements.push_back(tensor_type());
    } while (accept(','));
    expect(')', "to end a tuple type");
  }
  return Abstract::tuple(std::move(elements));
}

Scalar Parser::scalar() {
  if (accept_keyword("true")) return Scalar(true);
  if (accept_keyword("false")) return Scalar(false);
  const size_t start = pos_;
  const AttrValue v = attr_value();
  if (const auto* i = std::get_if<int64_t>(&v)) return Scalar(*i);
  if (const auto* d = std::get_if<double>(&v)) return Scalar(*d);
  fail_at(start, "expected a number or true/false in scalar(...)");
}

AttrValue Parser::attr_value() {
  skip_space();
  const size_t start = pos_;
  if (at('"')) return quoted();
  if (accept('[')) {
    std::vector<int64_t> values;
    if (!accept(']')) {
      do {
        values.push_back(integer("a list element"));
      } while (accept(','));
      expect(']', "to end an integer list");
    }
    return values;
  }
  if (pos_ < text_.size() && is_ident_start(text_[pos_]) && text_.compare(pos_, 3, "inf") != 0 &&
      text_.compare(pos_, 3, "nan") != 0) {
    const std::string_view id = ident();
    if (id == "None") return std::monostate{};
    if (id == "true") return true;
    if (id == "false") return false;
    if (id == "scalar") {
      expect('(', "after scalar");
      const Scalar s = scalar();
      expect(')', "to end scalar(...)");
      return s;
    }
    pos_ = start;
    return dtype();
  }
  const std::string_view tok = number_token();
  const char* first = tok.data() + (!tok.empty() && tok[0] == '+' ? 1 : 0);
  const char* last = tok.data() + tok.size();
  if (tok.find_first_of(".eEin") == std::string_view::npos) {
    int64_t i = 0;
    const auto r = std::from_chars(first, last, i);
    if (!tok.empty() && r.ec == std::errc() && r.ptr == last) return i;
  } else {
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc() && r.ptr == last) return d;
  }
  pos_ = start;
  fail("expected an attribute value, found " + found());
}

namespace {

template <typename T>
bool parse_element(std::string_view tok, void* out) {
  const char* first = tok.data() + (!tok.empty() && tok[0] == '+' ? 1 : 0);
  const char* last = tok.data() + tok.size();
  if constexpr (std::is_same_v<T, bool>) {
    if (tok != "true" && tok != "false") return false;
    *static_cast<bool*>(out) = tok == "true";
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    T v{};
    const auto r = std::from_chars(first, last, v);
    if (r.ec != std::errc() || r.ptr != last) return false;
    *static_cast<T*>(out) = v;
    return true;
  } else if constexpr (std::is_same_v<T, double>) {
    const auto r = std::from_chars(first, last, *static_cast<double*>(out));
    return r.ec == std::errc() && r.ptr == last;
  } else {
    float f = 0;
    const auto r = std::from_chars(first, last, f);
    if (r.ec != std::errc() || r.ptr != last) return false;
    *static_cast<T*>(out) = T(f);
    return true;
  }
}

using ElementParser = bool (*)(std::string_view, void*);

ElementParser element_parser(DType dtype) {
  switch (dtype) {
    case DType::kBool: return parse_element<bool>;
    case DType::kInt8: return parse_element<int8_t>;
    case DType::kUInt8: return parse_element<uint8_t>;
    case DType::kInt16: return parse_element<int16_t>;
    case DType::kInt32: return parse_element<int32_t>;
    case DType::kInt64: return parse_element<int64_t>;
    case DType::kFloat16: return parse_element<Half>;
    case DType::kBFloat16: return parse_element<BFloat16>;
    case DType::kFloat32: return parse_element<float>;
    case DType::kFloat64: return parse_element<double>;
  }
  return nullptr;
}

}  // namespace

Tensor Parser::constant(const TensorMeta& meta) {
  // Every element takes two characters at least ("0,"): a shape larger than the rest of the text
  // can hold fails here, with its line, rather than asking for its memory first.
  const int64_t n = shape_numel(meta.shape);
  if (static_cast<uint64_t>(n) > (text_.size() - pos_) / 2 + 1) {
    fail("a constant of shape " + shape_str(meta.shape) + " has " + std::to_string(n) +
         " elements, more than the rest of the text holds");
  }
  Tensor t = Tensor::empty(meta.shape, meta.dtype);
  t.impl()->weak = meta.weak;
  const ElementParser parse = element_parser(meta.dtype);
  auto* data = t.numel() > 0 ? static_cast<char*>(t.data_ptr()) : nullptr;
  const size_t item = itemsize(meta.dtype);
  expect('[', "to start the constant's elements");
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) expect(',', "between elements");
    skip_space();
    const size_t start = pos_;
    const std::string_view tok = number_token();
    if (tok.empty() || !parse(tok, data + static_cast<size_t>(i) * item)) {
      pos_ = start;
      fail("expected a " + std::string(dtype_name(meta.dtype)) + " element, found " + found());
    }
  }
  if (!at(']')) {
    fail("expected ']' after " + std::to_string(n) + " elements (the shape's size), found " +
         found());
  }
  ++pos_;
  return t;
}

NodePtr Parser::reference() {
  skip_space();
  const size_t start = pos_;
  const uint64_t id = node_id();
  Node* n = nullptr;
  if (id < dense_.size()) {
    n = dense_[id];
  } else if (auto it = sparse_.find(id); it != sparse_.end()) {
    n = it->second;
  }
  if (n == nullptr) fail_at(start, "use of undefined node %" + std::to_string(id));
  return detail::IrAccess::slots(*graph_)[detail::IrAccess::slot(*n)];
}

void Parser::define(uint64_t id, size_t pos, const NodePtr& node) {
  Node** slot = nullptr;
  if (id < text_.size() + 1024) {
    if (id >= dense_.size()) dense_.resize(std::max<size_t>(id + 1, dense_.size() * 2), nullptr);
    slot = &dense_[id];
  } else {
    slot = &sparse_[id];
  }
  if (*slot != nullptr) fail_at(pos, "node %" + std::to_string(id) + " is defined twice");
  *slot = node.get();
}

void Parser::parse_statement(FuncGraph& g) {
  const size_t start = pos_;
  const uint64_t id = node_id();
  expect('=', "after the node id");
  NodePtr node;
  if (accept_keyword("const")) {
    if (accept_keyword("None")) {
      node = detail::IrAccess::add_value(g, id, Tensor());
    } else {
      const TensorMeta meta = tensor_type();
      node = detail::IrAccess::add_value(g, id, constant(meta));
    }
  } else {
    skip_space();
    const size_t op_pos = pos_;
    std::string op = name("an op name or 'const'");
    if (op == kReturn) fail_at(op_pos, "'Return' is written as a return statement");
    expect('(', "after the op name");
    std::vector<NodePtr>& inputs = inputs_;
    inputs.clear();
    if (!accept(')')) {
      do {
        inputs.push_back(reference());
      } while (accept(','));
      expect(')', "after the inputs");
    }
    Attrs attrs;
    if (accept('{')) {
      do {
        skip_space();
        const size_t attr_pos = pos_;
        std::string attr = name("an attribute name");
        if (attrs.has(attr)) fail_at(attr_pos, "attribute '" + attr + "' is given twice");
        expect('=', "after the attribute name");
        attrs.set(attr, attr_value());
      } while (accept(','));
      expect('}', "to end the attributes");
    }
    expect(':', "before the node's type");
    Abstract abstract = type();
    node = detail::IrAccess::add_cnode(
        g, id,
        std::allocate_shared<Primitive>(ArenaAllocator<Primitive>(detail::IrAccess::arena(g)),
                                        std::move(op), std::move(attrs)),
        inputs, std::move(abstract));
    inputs.clear();
  }
  define(id, start, node);
}

FuncGraphPtr Parser::parse_graph() {
  if (!accept_keyword("graph")) fail("expected 'graph', found " + found());
  skip_space();
  auto g = std::make_shared<FuncGraph>(quoted());
  graph_ = g.get();
  expect('(', "to start the parameters");
  if (!accept(')')) {
    std::vector<std::string> names;
    do {
      skip_space();
      const size_t start = pos_;
      const uint64_t id = node_id();
      std::string param_name;
      if (at('"')) {
        param_name = quoted();
        if (std::find(names.begin(), names.end(), param_name) != names.end()) {
          fail_at(start, "two parameters are named \"" + param_name + "\"");
        }
        names.push_back(param_name);
      }
      expect(':', "before the parameter's type");
      TensorMeta meta = tensor_type();
      define(id, start,
             detail::IrAccess::add_parameter(*g, id, std::move(meta), std::move(param_name)));
    } while (accept(','));
    expect(')', "to end the parameters");
  }
  expect('{', "to start the graph's body");
  while (!accept_keyword("return")) {
    if (!at('%')) fail("expected a node definition (%N = ...) or 'return', found " + found());
    parse_statement(*g);
  }
  std::vector<NodePtr> outputs;
  if (!at('}')) {
    do {
      skip_space();
      const size_t start = pos_;
      NodePtr out = reference();
      if (!out->abstract().is_tensor()) {
        fail_at(start, "the output " + out->debug_string() + " is " + out->abstract().str() +
                           ", not a tensor");
      }
      outputs.push_back(std::move(out));
    } while (accept(','));
  }
  expect('}', "to end the graph");
  skip_space();
  if (pos_ != text_.size()) fail("expected the end of the text after the graph, found " + found());
  g->set_outputs(outputs);
  return g;
}

}  // namespace

FuncGraphPtr parse(std::string_view text) { return Parser(text).parse_graph(); }

}  // namespace kiln::ir
