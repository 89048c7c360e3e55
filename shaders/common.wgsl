// Shared by every kernel: the parameter block (8 x vec4<u32>; floats are bitcast)
// and the 2-D grid helper (index = x + y * p.h.w threads per grid row).
struct Params {
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    d: vec4<u32>,
    e: vec4<u32>,
    f: vec4<u32>,
    g: vec4<u32>,
    h: vec4<u32>,
}

fn flat_index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * p.h.w;
}

fn flat_group(wid: vec3<u32>) -> u32 {
    return wid.x + wid.y * p.h.z;
}
