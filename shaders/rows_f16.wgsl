// Activation rows as f16 for the matrix-unit product (mm_coop.wgsl): row r of
// M rows of K f32 values becomes Kp = K rounded up to 32 f16 values, zero past
// K, written eight at a time as one vec4<u32> (pairs packed low half first).
// a = (K, Kp, M). Values past 65504 in magnitude become infinite.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> xh: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let chunks = p.a.y / 8u;
    let c = flat_group(wid) * 64u + t;
    if c >= chunks * p.a.z {
        return;
    }
    let kk = p.a.x;
    let k = (c % chunks) * 8u;
    let base = (c / chunks) * kk + k;
    var v: array<f32, 8>;
    if k + 8u <= kk {
        for (var i = 0u; i < 8u; i++) {
            v[i] = x[base + i];
        }
    } else {
        for (var i = 0u; i < 8u; i++) {
            if k + i < kk {
                v[i] = x[base + i];
            }
        }
    }
    xh[c] = vec4<u32>(
        pack2x16float(vec2<f32>(v[0], v[1])),
        pack2x16float(vec2<f32>(v[2], v[3])),
        pack2x16float(vec2<f32>(v[4], v[5])),
        pack2x16float(vec2<f32>(v[6], v[7])),
    );
}
