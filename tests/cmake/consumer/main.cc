// A program built out of tree against find_package(Kiln): makes tensors and runs an op.
#include <kiln/functional.h>
#include <kiln/op.h>

#include <iostream>

int main() {
  kiln::Tensor x = kiln::Tensor::empty({2, 3}, kiln::DType::kFloat32);
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i);
  kiln::Tensor y = kiln::to(x.transpose(0, 1), kiln::DType::kInt64);
  if (y.shape() != kiln::Shape{3, 2} || y.data<int64_t>()[1] != 3) return 1;
  if (kiln::OpRegistry::Instance().find("Cast") == nullptr) return 2;
  std::cout << "consumer ok\n";
  return 0;
}
