// my_backend.cpp — the tutorial backend: it logs what it is asked to do and delegates the work to
// the built-in kiln_cpu backend (BackendManager::Get), as DESIGN.md's example does.
//
//   kiln.graph.register_custom_backend("my_custom_backend", "libmy_backend.so")
//   @kiln.jit(backend="my_custom_backend")
//   def net(x): return kiln.mint.sin(x)
#include <kiln/backend.h>

#include <cstdio>

class MyBackend : public kiln::BackendBase {
 public:
  kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g,
                             const kiln::BackendJitConfig& c) override {
    const kiln::BackendGraphId id = cpu()->Build(g, c);
    std::printf("[my_custom_backend] Build graph \"%s\" (%zu nodes, jit_level %s) -> id %llu\n",
                g->name().c_str(), g->num_nodes(), c.jit_level.c_str(),
                static_cast<unsigned long long>(id));
    std::fflush(stdout);  // in order with the Python program's own output
    return id;
  }
  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
                          std::vector<kiln::Tensor>* out) override {
    std::printf("[my_custom_backend] Run id %llu on %zu inputs\n",
                static_cast<unsigned long long>(id), in.size());
    std::fflush(stdout);
    return cpu()->Run(id, in, out);
  }
  void ClearGraph(kiln::BackendGraphId id) override { cpu()->ClearGraph(id); }

 private:
  static kiln::BackendBase* cpu() { return kiln::BackendManager::Instance().Get("kiln_cpu"); }
};

KILN_REGISTER_BACKEND("my_custom_backend", MyBackend);
