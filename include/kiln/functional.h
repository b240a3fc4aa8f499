// The built-in ops as C++ functions: kiln::add, kiln::matmul, kiln::softmax, ...
//
//   #include <kiln/functional.h>
//   kiln::Tensor y = kiln::gelu(kiln::matmul(x, w) + b);
//
// Each function is a thin wrapper over call_op() on one registered primitive (PascalCase: Add,
// MatMul, Softmax), so it goes through eager dispatch exactly like a call from Python or a
// custom op, and the same primitive appears in traced graphs. Python's kiln.mint binds these one
// to one.
#pragma once

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/linalg.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/functional/sort.h"
