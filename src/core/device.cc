#include "kiln/device.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << (device.type == DeviceType::kCPU ? "cpu" : "custom") << ":" << device.index;
}

}  // namespace kiln
