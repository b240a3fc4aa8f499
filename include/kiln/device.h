// Devices: where a tensor's memory lives and where a kernel runs.
//
//   kiln::Device cpu = kiln::Device::cpu();
//
// Kiln ships CPU kernels; custom backends may add devices of their own through DeviceType::kCustom
// plus an index that the backend owns.
#pragma once

#include <ostream>

#include "kiln/export.h"

namespace kiln {

enum class DeviceType : uint8_t { kCPU, kCustom };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static constexpr Device cpu() { return Device{DeviceType::kCPU, 0}; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

KILN_API std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace kiln
