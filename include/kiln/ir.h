// The graph IR: FuncGraph, its nodes (Parameter, ValueNode, CNode) and Primitive
// (kiln/ir/node.h, kiln/ir/node_list.h, kiln/ir/func_graph.h), the text format
// (kiln/ir/text.h), the verifier (kiln/ir/verify.h) and Graphviz dumps (kiln/ir/dot.h).
//
//   #include <kiln/ir.h>
//   auto g = std::make_shared<kiln::FuncGraph>("f");
//   auto x = g->add_parameter(kiln::DType::kFloat32, {4}, "x");
//   g->set_output(g->add_cnode(std::make_shared<kiln::Primitive>("Neg"), {x}));
//   kiln::ir::verify(*g);
//   std::string text = kiln::ir::print(*g);
//   kiln::FuncGraphPtr again = kiln::ir::parse(text);
#pragma once

#include "kiln/ir/dot.h"
#include "kiln/ir/func_graph.h"
#include "kiln/ir/node.h"
#include "kiln/ir/node_list.h"
#include "kiln/ir/text.h"
#include "kiln/ir/verify.h"
