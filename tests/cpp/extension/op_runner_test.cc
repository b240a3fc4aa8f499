#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kiln/extension.h"

namespace kiln {
namespace {

// Copies input 0 into output 0 through the workspace, recording what the kernel saw.
class CopyThroughWorkspace : public OpRunner {
 public:
  using OpRunner::OpRunner;
  size_t CalcWorkspace() override { return inputs()[0].nbytes(); }
  void LaunchKernel() override {
    seen_workspace = workspace_ptr();
    seen_workspace_size = workspace_size();
    auto* tmp = static_cast<float*>(workspace_ptr());
    const float* in = inputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) tmp[i] = in[i] * 2;
    float* out = outputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) out[i] = tmp[i] + 1;
  }
  void* seen_workspace = nullptr;
  size_t seen_workspace_size = 0;
};

class Throwing : public OpRunner {
 public:
  Throwing(std::string name, bool kiln_error) : OpRunner(std::move(name)), kiln_error_(kiln_error) {}
  void LaunchKernel() override {
    KILN_CHECK_SHAPE(!kiln_error_) << "kernel says no";
    throw std::runtime_error("a plain exception");
  }

 private:
  bool kiln_error_;
};

Tensor iota(int64_t n) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

TEST(OpRunner, AllocatesOutputsAndWorkspace_ThenLaunches) {
  Tensor out(DType::kFloat32, {4});
  auto runner = std::make_shared<CopyThroughWorkspace>("Copy");
  runner->Run({iota(4)}, {out});
  ASSERT_TRUE(out.has_storage());
  EXPECT_TRUE(out.is_contiguous());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out.data<float>()[i], 2.0f * i + 1);
  EXPECT_EQ(runner->seen_workspace_size, 16u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(runner->seen_workspace) % kAlignment, 0u);
  EXPECT_EQ(runner->workspace_ptr(), nullptr);  // released after the launch
  EXPECT_EQ(runner->op_name(), "Copy");
  EXPECT_EQ(runner->inputs().size(), 1u);
}

TEST(OpRunner, KeepsOutputsThatHaveMemory) {
  Tensor out = Tensor::empty({3});
  void* before = out.data_ptr();
  std::make_shared<CopyThroughWorkspace>("Copy")->Run({iota(3)}, {out});
  EXPECT_EQ(out.data_ptr(), before);
  EXPECT_FLOAT_EQ(out.data<float>()[2], 5.0f);
}

TEST(OpRunner, AddsTheOpAndInputTypes_ToKernelErrors) {
  try {
    std::make_shared<Throwing>("MyOp", true)->Run({iota(2), Tensor()}, {Tensor(DType::kFloat32, {1})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape);
    EXPECT_NE(std::string(e.what()).find("kernel says no"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in MyOp(float32[2], None)"), std::string::npos)
        << e.what();
  }
}

TEST(OpRunner, TurnsOtherExceptionsIntoKilnErrors_WithTheOp) {
  try {
    std::make_shared<Throwing>("Plain", false)->Run({iota(2)}, {Tensor(DType::kFloat32, {2})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a plain exception"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in Plain(float32[2])"), std::string::npos) << e.what();
  }
}

TEST(OpRunner, RejectsUndefinedOutputs) {
  try {
    std::make_shared<CopyThroughWorkspace>("Copy")->Run({iota(2)}, {Tensor()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_NE(std::string(e.what()).find("output 0 is an undefined tensor"), std::string::npos)
        << e.what();
  }
}

TEST(OpRunner, ReportsAWrongDtype_FromData) {
  try {
    std::make_shared<CopyThroughWorkspace>("Copy")->Run({Tensor::empty({2}, DType::kInt64)},
                                                        {Tensor(DType::kFloat32, {2})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDType);
    EXPECT_NE(std::string(e.what()).find("in Copy(int64[2])"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
