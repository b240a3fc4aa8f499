// DynamicGraph and the jit's cache lookup (see dynamic_graph.h and Note [Dynamic batch size]).
#include "jit/dynamic_graph.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

namespace kiln::jit_detail {

// Note [Dynamic batch size]
// A dynamic function's signature leaves out the batch size B (SignatureKey::set_dynamic), so
// calls at every B share one cache entry, whose DynamicGraph keeps a built graph per B. Tracing
// gives a graph for one B only: shapes are concrete and ops keep shape-like integer attributes
// (Reshape's shape, a slice's bounds). The first call traces at B1 and builds a copy of that
// graph (the trace itself stays unoptimized: it is the template). The second call, at B2, traces
// again and compares the two graphs node by node in topological order (creation order, so the
// same program gives the same order): same kinds, ops, input positions, constants (by value) and
// attributes, except integers (and elements of integer lists) that differ, each of which must be
// linear in B with an integer slope: v(B) = v1 + k (B - B1), k = (v2 - v1) / (B2 - B1). The
// dimensions of every node's abstract are checked the same way. The third call, at B3, traces once
// more and compares with the first trace the same way (verify): every integer must lie on the
// line learned from B1 and B2, so an attribute like B * B, linear through any two batch sizes,
// is refused there (a factory's size is all that decides its shape: no inferred shape could tell).
// From then on a batch size is built by instantiating the template: parameters with B leading the
// batched ones, each CNode added again with its attributes evaluated at B and its abstract
// inferred, which must match the dimensions predicted. Constants are shared with the first trace
// (the same tensors). Three traces still cannot tell every dependence on B from a linear one: an
// integer that is linear at B1, B2 and B3 and not elsewhere (a Python max(b, 8)) is not detected.
// Pieces of the batch dimension are where this happens: x[::2] has ceil(B / 2) rows (1 and 2 at
// B = 2 and 3, like B - 1), chunk(x, 2)[0] too, and a slice bound past the dimension clamps to it
// (x[-2:] is x[:] at B = 1 and 2: the same graph as x itself). So a dynamic function is traced at
// every batch size, and each trace built, once (1) learn() finds a node that takes a piece of a
// dimension following B (takes_piece_of_batch: a Split of it, or a view that does not keep it
// whole as x[:, 0] and x[:, 1:] do; checked before anything else of the node, since such a piece
// need not even look linear), or (2) a trace noted a decision from a size
// (kiln::note_size_decision: Python's indexing and Tensor.slice for a clamped bound, mint.split /
// chunk for pieces that do not divide the dimension; x[:2] at B = 1 and 2 is x[:], which no node
// shows; a step slice or a squeeze of a dimension of size 0 or 1, which looks whole or is a
// no-op; Tensor.squeeze of a dimension that is not 1). Then the graphs need not agree from one
// batch size to the next.
// Python code that branches on a size itself (`if x.shape[0] > 2`) is seen only through the two
// graphs it makes. It branches on batch sizes 0 and 1 most often, where no node need show it (an
// empty batch; a single sample: BatchNorm refuses one value per channel and skips an empty
// batch's update of its running statistics, where a graph built from the template filled them
// with NaN), and at 1 a piece of the batch may be all of it (x[0] is a Reshape there and an
// AsStrided elsewhere; x[:1] no node at all). So those two batch sizes key themselves
// (SignatureKey's kSmallBatch): each has an entry, a trace and a front end of its own, and never
// takes part in a template.
// Only ops record attributes; Python numbers the function computes from B are constants, which
// must be equal in both traces.

namespace {

// A value linear in the batch size: at(b) = first + slope * (b - first batch size).
struct Affine {
  int64_t first = 0;
  int64_t slope = 0;
  bool operator==(const Affine& o) const { return first == o.first && slope == o.slope; }
};

// One integer of a CNode's attributes that follows the batch size.
struct AttrMap {
  size_t item = 0;      // index in Attrs::items()
  int64_t element = -1;  // element of an integer list; -1 for an integer attribute
  Affine value;
  bool scalar = false;  // an integer Scalar (arange's end), not an int64
  bool operator==(const AttrMap& o) const {
    return item == o.item && element == o.element && value == o.value && scalar == o.scalar;
  }
};

bool same_value(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.ready() == b.ready()) return true;
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.is_weak_scalar() != b.is_weak_scalar())
    return false;
  return std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

std::vector<const TensorMeta*> tensors_of(const Abstract& a) {
  std::vector<const TensorMeta*> out;
  if (a.is_tensor()) out.push_back(&a.tensor());
  if (a.is_tuple()) {
    for (const TensorMeta& m : a.elements()) out.push_back(&m);
  }
  return out;
}

// Whether a node traced as c1 and c2 at two batch sizes takes a piece of a dimension of its input
// that follows the batch size (one whose size differs between the traces): what that piece is at
// another batch size need not be linear in it (x[::2] has ceil(B / 2) rows, x[:2] is x[:] up to
// B = 2, chunk(x, 2)[0] is ceil(B / 2) rows), and two traces cannot always tell. An AsStrided view
// keeps such a dimension whole when one of its dimensions has the input's size and stride there
// at both batch sizes, from the same offset (x[:, 0], x[:, 1:3], x.T do); a Split takes pieces of
// its `dim`.
bool takes_piece_of_batch(const CNode& c1, const CNode& c2) {
  const std::string& op = c1.primitive()->name();
  if (op != "AsStrided" && op != "Split") return false;
  const Shape& in1 = c1.input(0)->abstract().shape();
  const Shape& in2 = c2.input(0)->abstract().shape();
  if (in1.size() != in2.size()) return true;
  const Attrs& attrs1 = c1.primitive()->normalized_attrs();
  const Attrs& attrs2 = c2.primitive()->normalized_attrs();
  if (op == "Split") {
    const int64_t rank = static_cast<int64_t>(in1.size());
    int64_t dim = attrs1.get<int64_t>("dim");
    if (dim < 0) dim += rank;
    return dim >= 0 && dim < rank && in1[dim] != in2[dim];
  }
  const auto size1 = attrs1.get<std::vector<int64_t>>("size");
  const auto size2 = attrs2.get<std::vector<int64_t>>("size");
  const auto stride1 = attrs1.get<std::vector<int64_t>>("stride");
  const auto stride2 = attrs2.get<std::vector<int64_t>>("stride");
  if (attrs1.get<int64_t>("offset") != attrs2.get<int64_t>("offset")) return true;  // x[-1]
  if (size1.size() != size2.size()) return true;
  const Shape strides1 = contiguous_strides(in1), strides2 = contiguous_strides(in2);  // values
  for (size_t d = 0; d < in1.size(); ++d) {
    if (in1[d] == in2[d]) continue;
    bool whole = false;
    for (size_t e = 0; e < size1.size() && !whole; ++e) {
      whole = size1[e] == in1[d] && size2[e] == in2[d] && stride1[e] == strides1[d] &&
              stride2[e] == strides2[d];
    }
    if (!whole) return true;
  }
  return false;
}

}  // namespace

struct DynamicGraph::Template {
  struct NodeInfo {
    NodePtr node;                                  // in the first trace
    std::vector<size_t> inputs;                    // positions of its inputs in `nodes`
    std::vector<AttrMap> attrs;                    // integers that follow the batch size
    std::vector<std::vector<int64_t>> dim_slopes;  // per tensor of its abstract, per dimension
  };
  std::vector<NodeInfo> nodes;  // the first trace in topological order
  int64_t second_batch = -1;    // the batch size of the second trace, once learned
  bool views_follow_batch = false;  // a node takes a piece of the batch (takes_piece_of_batch)
};

DynamicGraph::DynamicGraph(FuncGraphPtr first, int64_t batch, std::vector<bool> batched,
                           JitOptions options)
    : first_(std::move(first)),
      first_batch_(batch),
      batched_(std::move(batched)),
      options_(std::move(options)) {
  KILN_ASSERT(batched_.size() == first_->parameters().size())
      << "graph \"" << first_->name() << "\" has " << first_->parameters().size()
      << " parameters, " << batched_.size() << " batched flags";
  auto base = std::make_shared<Template>();
  const std::vector<NodePtr> order = first_->topological_order();
  base->nodes.reserve(order.size());
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position.emplace(order[i].get(), i);
  for (const NodePtr& n : order) {
    Template::NodeInfo info;
    info.node = n;
    if (n->is_cnode()) {
      for (const NodePtr& in : static_cast<const CNode&>(*n).inputs()) {
        info.inputs.push_back(position.at(in.get()));
      }
    }
    for (const TensorMeta* m : tensors_of(n->abstract())) {
      info.dim_slopes.emplace_back(m->shape.size(), 0);
    }
    base->nodes.push_back(std::move(info));
  }
  base_ = std::move(base);
}

DynamicGraph::~DynamicGraph() = default;

std::shared_ptr<CompiledGraph> DynamicGraph::find(int64_t batch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = built_.find(batch);
  return it != built_.end() ? it->second : nullptr;
}

bool DynamicGraph::learned() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return learned_ != nullptr;
}

bool DynamicGraph::traces_each_batch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traces_each_batch_ || (learned_ != nullptr && learned_->views_follow_batch);
}

void DynamicGraph::trace_each_batch() {
  std::lock_guard<std::mutex> lock(mutex_);
  traces_each_batch_ = true;
}

size_t DynamicGraph::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return built_.size();
}

std::shared_ptr<const DynamicGraph::Template> DynamicGraph::template_snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return learned_;
}

bool DynamicGraph::verified() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verified_;
}

void DynamicGraph::learn(const FuncGraph& second, int64_t batch) {
  std::shared_ptr<Template> learned = compare(second, batch);
  std::lock_guard<std::mutex> lock(mutex_);
  if (learned_ == nullptr) learned_ = std::move(learned);
}

void DynamicGraph::verify(const FuncGraph& third, int64_t batch) {
  const std::shared_ptr<const Template> learned = template_snapshot();
  KILN_ASSERT(learned != nullptr) << "graph \"" << first_->name() << "\" verified before learn()";
  const std::shared_ptr<const Template> check = compare(third, batch);
  if (check->views_follow_batch) {
    trace_each_batch();
    return;
  }
  for (size_t i = 0; i < learned->nodes.size(); ++i) {
    const Template::NodeInfo& two = learned->nodes[i];
    const Template::NodeInfo& three = check->nodes[i];
    KILN_CHECK_VALUE(two.dim_slopes == three.dim_slopes && two.attrs == three.attrs)
        << "jit (dynamic=True): graph \"" << first_->name()
        << "\" does not follow the batch size: " << two.node->debug_string()
        << " has integer attributes or dimensions that are linear "
        << "through batch sizes " << first_batch_ << " and " << learned->second_batch
        << " but not at " << batch << " (B * B is linear through any two); dynamic=True needs a "
        << "graph whose only dependence on the batch size is integer attributes and dimensions "
        << "linear in it. Use dynamic=False (each batch size is traced and built) for this "
        << "function";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  verified_ = true;
}

std::shared_ptr<DynamicGraph::Template> DynamicGraph::compare(const FuncGraph& second,
                                                              int64_t batch) const {
  KILN_ASSERT(batch != first_batch_) << "comparing two traces at batch size " << batch;
  auto learned = std::make_shared<Template>(*base_);
  learned->second_batch = batch;
  const int64_t db = batch - first_batch_;
  const auto fail = [&](const Node& node) {
    return "jit (dynamic=True): graph \"" + first_->name() +
           "\" does not follow the batch size (the leading dimension of its batched inputs): "
           "traced at batch sizes " +
           std::to_string(first_batch_) + " and " + std::to_string(batch) + ", " +
           node.debug_string() + " ";
  };
  constexpr const char* kAdvice =
      "; dynamic=True needs a graph whose only dependence on the batch size is integer "
      "attributes and dimensions linear in it (no data-dependent shapes, no constants computed "
      "from it). Use dynamic=False (each batch size is traced and built) for this function";
  // An integer at both batch sizes, as an Affine, or false when not linear with an integer slope.
  const auto linear = [&](int64_t v1, int64_t v2, Affine* out) {
    if ((v2 - v1) % db != 0) return false;
    *out = Affine{v1, (v2 - v1) / db};
    return true;
  };

  // Compared up to the shorter one's length: where a graph has more nodes, the first difference
  // names a node.
  const std::vector<NodePtr> order = second.topological_order();
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position.emplace(order[i].get(), i);
  std::unordered_map<const Node*, size_t> parameter1, parameter2;
  for (size_t i = 0; i < first_->parameters().size(); ++i) {
    parameter1.emplace(first_->parameters()[i].get(), i);
  }
  for (size_t i = 0; i < second.parameters().size(); ++i) {
    parameter2.emplace(second.parameters()[i].get(), i);
  }

  for (size_t i = 0; i < std::min(order.size(), learned->nodes.size()); ++i) {
    Template::NodeInfo& info = learned->nodes[i];
    const Node& n1 = *info.node;
    const Node& n2 = *order[i];
    if (n1.kind() != n2.kind()) {
      KILN_FAIL(kValue) << fail(n1) << "is " << n2.debug_string() << " at the second" << kAdvice;
    }
    if (n1.is_parameter()) {
      if (parameter1.at(&n1) != parameter2.at(&n2)) {
        KILN_FAIL(kValue) << fail(n1) << "is another parameter at the second" << kAdvice;
      }
    } else if (n1.is_value()) {
      if (!same_value(static_cast<const ValueNode&>(n1).value(),
                      static_cast<const ValueNode&>(n2).value())) {
        KILN_FAIL(kValue) << fail(n1)
                          << "is a constant whose value differs at the second (a number "
                             "computed from the batch size?)"
                          << kAdvice;
      }
    } else {
      const auto& c1 = static_cast<const CNode&>(n1);
      const auto& c2 = static_cast<const CNode&>(n2);
      if (c1.primitive()->name() != c2.primitive()->name()) {
        KILN_FAIL(kValue) << fail(n1) << "is " << n2.debug_string() << " at the second" << kAdvice;
      }
      bool same_inputs = c1.num_inputs() == c2.num_inputs();
      for (size_t k = 0; same_inputs && k < c1.num_inputs(); ++k) {
        same_inputs = info.inputs[k] == position.at(c2.input(k).get());
      }
      if (!same_inputs) {
        KILN_FAIL(kValue) << fail(n1) << "has other inputs at the second ("
                          << n2.debug_string() << ")" << kAdvice;
      }
      if (takes_piece_of_batch(c1, c2)) {
        // Traced at every batch size from now on: nothing more to learn (the graphs may even
        // differ further on, as a split into more pieces does).
        learned->views_follow_batch = true;
        break;
      }
      const auto& items1 = c1.primitive()->attrs().items();
      const auto& items2 = c2.primitive()->attrs().items();
      if (items1.size() != items2.size()) {
        KILN_FAIL(kValue) << fail(n1) << "has other attributes at the second" << kAdvice;
      }
      for (size_t a = 0; a < items1.size(); ++a) {
        const auto& [name, v1] = items1[a];
        const AttrValue& v2 = items2[a].second;
        if (name != items2[a].first) {
          KILN_FAIL(kValue) << fail(n1) << "has other attributes at the second" << kAdvice;
        }
        if (v1 == v2) continue;
        // An integer Scalar (arange's end: arange(x.shape[0]), a gradient's arange over numel)
        // follows the batch as an integer does.
        const auto integer = [](const AttrValue& v) -> std::optional<int64_t> {
          if (const auto* i = std::get_if<int64_t>(&v)) return *i;
          const auto* s = std::get_if<Scalar>(&v);
          if (s != nullptr && s->is_integral()) return s->to_int();
          return std::nullopt;
        };
        const std::optional<int64_t> i1 = integer(v1);
        const std::optional<int64_t> i2 = integer(v2);
        const auto* l1 = std::get_if<std::vector<int64_t>>(&v1);
        const auto* l2 = std::get_if<std::vector<int64_t>>(&v2);
        const auto not_linear = [&]() {
          return fail(n1) + "has attribute " + name + " = " + attr_str(v1) + " at the first and " +
                 attr_str(v2) + " at the second, which is not linear in the batch size";
        };
        if (i1 && i2) {
          AttrMap map{a, -1, {}, std::holds_alternative<Scalar>(v1)};
          if (!linear(*i1, *i2, &map.value)) {
            KILN_FAIL(kValue) << not_linear() << kAdvice;
          }
          info.attrs.push_back(map);
        } else if (l1 != nullptr && l2 != nullptr && l1->size() == l2->size()) {
          for (size_t e = 0; e < l1->size(); ++e) {
            AttrMap map{a, static_cast<int64_t>(e), {}};
            if ((*l1)[e] == (*l2)[e]) continue;
            if (!linear((*l1)[e], (*l2)[e], &map.value)) {
              KILN_FAIL(kValue) << not_linear() << " (element " << e << ")" << kAdvice;
            }
            info.attrs.push_back(map);
          }
        } else {
          KILN_FAIL(kValue) << fail(n1) << "has attribute " << name << " = " << attr_str(v1)
                            << " at the first and " << attr_str(v2) << " at the second" << kAdvice;
        }
      }
    }
    const std::vector<const TensorMeta*> t1 = tensors_of(n1.abstract());
    const std::vector<const TensorMeta*> t2 = tensors_of(n2.abstract());
    bool same_kind = n1.abstract().kind() == n2.abstract().kind() && t1.size() == t2.size();
    for (size_t t = 0; same_kind && t < t1.size(); ++t) {
      same_kind = t1[t]->dtype == t2[t]->dtype && t1[t]->weak == t2[t]->weak &&
                  t1[t]->shape.size() == t2[t]->shape.size();
    }
    if (!same_kind) {
      KILN_FAIL(kValue) << fail(n1) << "is " << n1.abstract().str() << " at the first and "
                        << n2.abstract().str() << " at the second" << kAdvice;
    }
    for (size_t t = 0; t < t1.size(); ++t) {
      for (size_t d = 0; d < t1[t]->shape.size(); ++d) {
        Affine dim;
        if (!linear(t1[t]->shape[d], t2[t]->shape[d], &dim)) {
          KILN_FAIL(kValue) << fail(n1) << "is " << n1.abstract().str() << " at the first and "
                            << n2.abstract().str()
                            << " at the second: dimension " << d
                            << " is not linear in the batch size" << kAdvice;
        }
        info.dim_slopes[t][d] = dim.slope;
      }
    }
  }
  KILN_CHECK_VALUE(learned->views_follow_batch || order.size() == learned->nodes.size())
      << "jit (dynamic=True): graph \"" << first_->name() << "\" has " << learned->nodes.size()
      << " nodes at batch size " << first_batch_ << " and " << order.size() << " at " << batch
      << kAdvice;
  return learned;
}

FuncGraphPtr DynamicGraph::instantiate(int64_t batch) const {
  std::shared_ptr<const Template> learned = template_snapshot();
  KILN_ASSERT(learned != nullptr || batch == first_batch_)
      << "graph \"" << first_->name() << "\" cannot be instantiated at batch size " << batch
      << " before a second trace";
  const Template& t = learned != nullptr ? *learned : *base_;
  const int64_t db = batch - first_batch_;
  const auto at = [&](int64_t first, int64_t slope) { return first + slope * db; };

  auto g = std::make_shared<FuncGraph>(first_->name());
  std::unordered_map<const Node*, NodePtr> parameters;
  for (size_t i = 0; i < first_->parameters().size(); ++i) {
    const ParameterPtr& p = first_->parameters()[i];
    Shape shape = p->abstract().shape();
    if (batched_[i]) shape[0] = batch;
    parameters.emplace(p.get(), g->add_parameter(p->abstract().dtype(), shape, p->name()));
  }
  std::vector<NodePtr> made(t.nodes.size());
  std::vector<NodePtr> inputs;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Template::NodeInfo& info = t.nodes[i];
    const Node& n = *info.node;
    if (n.is_parameter()) {
      made[i] = parameters.at(&n);
      continue;
    }
    if (n.is_value()) {
      made[i] = g->add_value(static_cast<const ValueNode&>(n).value());
      continue;
    }
    const auto& c = static_cast<const CNode&>(n);
    inputs.clear();
    for (size_t k : info.inputs) inputs.push_back(made[k]);
    if (c.primitive()->is_return()) {
      g->set_outputs(inputs);
      continue;
    }
    Attrs attrs = c.primitive()->attrs();
    for (const AttrMap& map : info.attrs) {
      const auto& [name, value] = attrs.items()[map.item];
      if (map.element < 0) {
        const int64_t v = at(map.value.first, map.value.slope);
        attrs.set(name, map.scalar ? AttrValue(Scalar(v)) : AttrValue(v));
      } else {
        std::vector<int64_t> list = std::get<std::vector<int64_t>>(value);
        list[static_cast<size_t>(map.element)] = at(map.value.first, map.value.slope);
        attrs.set(name, std::move(list));
      }
    }
    const auto not_following = [&]() {
      return "jit (dynamic=True): graph \"" + first_->name() + "\" instantiated at batch size " +
             std::to_string(batch) + " (traced at " + std::to_string(first_batch_) + " and " +
             std::to_string(t.second_batch) + ") fails at " + n.debug_string() + ": ";
    };
    CNodePtr node;
    try {
      node = g->add_cnode(std::make_shared<Primitive>(c.primitive()->name(), std::move(attrs)),
                          inputs);
    } catch (const Error& e) {
      KILN_FAIL(kValue) << not_following() << e.message()
                        << "; its attributes are not linear in the batch size. Use "
                               "dynamic=False for this function";
    }
    const std::vector<const TensorMeta*> expected = tensors_of(n.abstract());
    const std::vector<const TensorMeta*> got = tensors_of(node->abstract());
    bool follows = expected.size() == got.size();
    for (size_t k = 0; follows && k < expected.size(); ++k) {
      follows = expected[k]->shape.size() == got[k]->shape.size();
      for (size_t d = 0; follows && d < expected[k]->shape.size(); ++d) {
        follows = got[k]->shape[d] == at(expected[k]->shape[d], info.dim_slopes[k][d]);
      }
    }
    if (!follows) {
      KILN_FAIL(kValue) << not_following() << "it is " << node->abstract().str()
                        << ", not linear in the batch size (" << n.abstract().str()
                        << " at batch size " << first_batch_
                        << "). Use dynamic=False for this function";
    }
    made[i] = std::move(node);
  }
  return g;
}

std::shared_ptr<CompiledGraph> DynamicGraph::build(int64_t batch, FuncGraphPtr traced) {
  std::shared_ptr<CompiledGraph> graph =
      CompiledGraph::compile(traced != nullptr ? std::move(traced) : instantiate(batch), options_);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = built_.emplace(batch, graph);
  return it->second;  // another thread's, when it built this batch size first
}

Lookup lookup(GraphCache& cache, SignatureKey& key, const JitOptions& options,
              const std::function<Traced()>& trace,
              const std::function<void(const void*, const void*)>& check_front_end) {
  const int64_t batch = key.batch();
  const bool dynamic = batch >= 0;
  Lookup found;
  found.entry = cache.find(key, /*count=*/!dynamic);
  if (found.entry == nullptr) {
    if (dynamic) cache.count(false);
    Traced traced = trace();
    CacheEntry made;
    if (dynamic) {
      made.dynamic = std::make_shared<DynamicGraph>(std::move(traced.graph), batch, key.batched(),
                                                    options);
      if (traced.size_decisions) made.dynamic->trace_each_batch();
      made.graph = made.dynamic->build(batch);
    } else {
      made.graph = CompiledGraph::compile(std::move(traced.graph), options);
    }
    made.front_end = std::move(traced.front_end);
    found.graph = made.graph;
    found.built = true;
    found.entry = cache.insert(key, std::move(made));
    return found;
  }
  if (!dynamic) {
    found.graph = found.entry->graph;
    return found;
  }
  DynamicGraph& graphs = *found.entry->dynamic;
  found.graph = graphs.find(batch);
  cache.count(found.graph != nullptr);
  if (found.graph != nullptr) return found;
  FuncGraphPtr traced;
  if (!graphs.verified() || graphs.traces_each_batch()) {
    Traced again = trace();
    if (check_front_end) check_front_end(found.entry->front_end.get(), again.front_end.get());
    if (again.size_decisions) graphs.trace_each_batch();
    // Learned (and verified) only while needed: a graph traced at each batch size may differ from
    // one to the next (a split into more pieces), which its own trace builds.
    if (!graphs.traces_each_batch()) {
      if (!graphs.learned()) {
        graphs.learn(*again.graph, batch);
      } else {
        graphs.verify(*again.graph, batch);
      }
    }
    if (graphs.traces_each_batch()) traced = std::move(again.graph);
  }
  found.graph = graphs.build(batch, std::move(traced));
  found.built = true;
  return found;
}

}  // namespace kiln::jit_detail
