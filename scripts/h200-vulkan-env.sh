# Sourced by the scripts/*h200*.sh device scripts: installs the Vulkan loader carried in
# .gl (see ../shared/gpu.md) and points it at the NVIDIA driver of the H200 machine.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
