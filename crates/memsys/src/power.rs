//! Memory power: per-bank power states and energy over time (seed 004).
//!
//! A *bank* here is the unit the OS can power down: a contiguous range of
//! page frames (a PASR segment, a rank). Each bank is in one of four
//! [`PowerState`]s. Partial array self-refresh lets a bank with no
//! allocated frame go down (to the preset's `offline_state`); a bank with
//! data stays in Active-Idle between accesses. Energy is counted per bank
//! over time ([`EnergyMeter`]), plus the copy traffic of page migration:
//! while a page is copied, the source and destination are in Read/Write
//! instead of Active-Idle.
//!
//! What is left out, on purpose: the energy of the workload's own reads
//! and writes. It is the same whatever the allocator does (the same
//! accesses reach the same amount of data), so comparing allocators needs
//! only the background power of banks up versus down and the migrations'
//! copies. Transition energy between states is also left out (exits from
//! self-refresh take microseconds; banks change state seldom here).
//!
//! Three presets (see [`PowerModel::preset_names`]), each file citing its
//! numbers: `seed004-relative` (the seed's Table 1, relative units),
//! `ddr4-2400-micron` and `lpddr4-3200-micron` (IDD currents of Micron
//! devices as DRAMPower's memspecs give them, in mW and mJ).
//!
//! ```
//! use nvmos_memsys::power::{EnergyMeter, PowerModel, PowerState};
//!
//! let seed = PowerModel::preset("seed004-relative")?;
//! assert_eq!(seed.bank_power(PowerState::ActiveIdle, 1 << 27), 63.0);
//! // 4 banks of 128 MiB for 10 s, one of them holding data.
//! let mut meter = EnergyMeter::new(seed, 1 << 27, 4);
//! meter.advance(10.0, 1);
//! let e = meter.report();
//! assert_eq!(e.background, 10.0 * (63.0 + 3.0 * 1.0));
//! assert_eq!(e.all_up, 10.0 * 4.0 * 63.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What a bank is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    /// Bursting reads or writes.
    ReadWrite,
    /// Up, holding data, between accesses.
    ActiveIdle,
    /// Refreshing itself, no access possible; keeps data.
    SelfRefresh,
    /// Off: loses its data.
    DeepPowerDown,
}

impl PowerState {
    /// Every state, highest power first.
    pub const ALL: [PowerState; 4] = [
        PowerState::ReadWrite,
        PowerState::ActiveIdle,
        PowerState::SelfRefresh,
        PowerState::DeepPowerDown,
    ];
}

/// Relative power per bank state, as the seed's Table 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelativeSpec {
    /// Read/Write (100 in the seed).
    pub read_write: f64,
    /// Active-Idle.
    pub active_idle: f64,
    /// Self-Refresh.
    pub self_refresh: f64,
    /// Deep-Power-Down.
    pub deep_power_down: f64,
    /// Bandwidth at which migration copies pages, GB/s.
    pub copy_bandwidth_gb_per_s: f64,
}

/// One supply rail's currents (mA) in each state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rail {
    /// Rail name (VDD, VPP, VDD2, …).
    pub name: String,
    /// Supply voltage, V.
    pub volts: f64,
    /// Burst read current (IDD4R), mA.
    pub read: f64,
    /// Burst write current (IDD4W), mA.
    pub write: f64,
    /// Active standby current (IDD3N), mA.
    pub active_idle: f64,
    /// Self-refresh current (IDD6), mA.
    pub self_refresh: f64,
    /// Deep power-down current (IDD8), mA, where the device has the state.
    #[serde(default)]
    pub deep_power_down: Option<f64>,
}

/// Current-based (IDD) power of one rank of devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IddSpec {
    /// Devices in a rank (all active together).
    pub devices_per_rank: u32,
    /// Capacity of one device, Gbit.
    pub device_gbit: f64,
    /// Transfers per second on the bus, millions.
    pub data_rate_mt_per_s: f64,
    /// Bytes per transfer (8 for a 64-bit rank).
    pub bus_bytes: u32,
    /// Supply rails.
    pub rails: Vec<Rail>,
}

/// A power preset as written in TOML: exactly one of `relative`, `idd`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerSpec {
    /// Short name.
    pub name: String,
    /// What it models.
    #[serde(default)]
    pub description: String,
    /// Where the numbers come from.
    pub source: String,
    /// The state a bank with no allocated frame goes to.
    pub offline_state: PowerState,
    /// Relative per-bank table.
    #[serde(default)]
    pub relative: Option<RelativeSpec>,
    /// Current-based model.
    #[serde(default)]
    pub idd: Option<IddSpec>,
}

/// Why a power preset cannot be used. Each names the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    /// No preset of that name.
    #[error("no power preset named {name:?}; presets: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The presets there are.
        known: String,
    },
    /// The file could not be read.
    #[error("reading power model {file}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or not the expected fields.
    #[error("{file}: not a power model")]
    Parse {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// Inconsistent contents.
    #[error("{file}: {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong, naming the field.
        problem: String,
    },
}

/// A checked power model.
///
/// Invariants: every power, current, voltage and rate is finite and not
/// negative; rates and sizes are positive; per bank, Read/Write ≥
/// Active-Idle ≥ Self-Refresh (≥ Deep-Power-Down where given); the
/// offline state is Self-Refresh or Deep-Power-Down and the model has it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PowerModel {
    spec: PowerSpec,
}

/// Units of a model's figures.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Units {
    /// Unit of power figures.
    pub power: &'static str,
    /// Unit of energy figures (power × seconds).
    pub energy: &'static str,
}

const PRESETS: &[(&str, &str)] = &[
    (
        "seed004-relative",
        include_str!("../presets/power/seed004-relative.toml"),
    ),
    (
        "ddr4-2400-micron",
        include_str!("../presets/power/ddr4-2400-micron.toml"),
    ),
    (
        "lpddr4-3200-micron",
        include_str!("../presets/power/lpddr4-3200-micron.toml"),
    ),
];

impl PowerModel {
    /// Names of the built-in presets.
    pub fn preset_names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|(name, _)| *name)
    }

    /// A built-in preset.
    pub fn preset(name: &str) -> Result<PowerModel, PowerError> {
        let (_, text) =
            PRESETS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| PowerError::UnknownPreset {
                    name: name.to_owned(),
                    known: Self::preset_names().collect::<Vec<_>>().join(", "),
                })?;
        Self::from_toml_str(text, &alloc_name(name))
    }

    /// A preset name or a TOML file.
    pub fn load(name_or_path: &str) -> Result<PowerModel, PowerError> {
        if PRESETS.iter().any(|(n, _)| *n == name_or_path) {
            return Self::preset(name_or_path);
        }
        let path = Path::new(name_or_path);
        if !path.exists() && !name_or_path.contains(['/', '.']) {
            return Self::preset(name_or_path);
        }
        let text = std::fs::read_to_string(path).map_err(|source| PowerError::Io {
            file: name_or_path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text, name_or_path)
    }

    /// Parse and check a model written in TOML; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<PowerModel, PowerError> {
        let spec: PowerSpec = toml::from_str(text).map_err(|source| PowerError::Parse {
            file: file.to_owned(),
            source: Box::new(source),
        })?;
        Self::new(spec).map_err(|problem| PowerError::Invalid {
            file: file.to_owned(),
            problem,
        })
    }

    /// Check a spec.
    pub fn new(spec: PowerSpec) -> Result<PowerModel, String> {
        fn number(name: &str, v: f64, positive: bool) -> Result<(), String> {
            if !v.is_finite() || v < 0.0 || (positive && v == 0.0) {
                let want = if positive { "positive" } else { "at least 0" };
                return Err(format!("{name} = {v} must be finite and {want}"));
            }
            Ok(())
        }
        match (&spec.relative, &spec.idd) {
            (Some(_), Some(_)) | (None, None) => {
                return Err("give exactly one of [relative] and [idd]".into())
            }
            (Some(r), None) => {
                number("relative.read_write", r.read_write, true)?;
                number("relative.active_idle", r.active_idle, false)?;
                number("relative.self_refresh", r.self_refresh, false)?;
                number("relative.deep_power_down", r.deep_power_down, false)?;
                number(
                    "relative.copy_bandwidth_gb_per_s",
                    r.copy_bandwidth_gb_per_s,
                    true,
                )?;
            }
            (None, Some(idd)) => {
                if idd.devices_per_rank == 0 || idd.bus_bytes == 0 {
                    return Err("idd.devices_per_rank and idd.bus_bytes must be positive".into());
                }
                number("idd.device_gbit", idd.device_gbit, true)?;
                number("idd.data_rate_mt_per_s", idd.data_rate_mt_per_s, true)?;
                if idd.rails.is_empty() {
                    return Err("idd.rails: give at least one rail".into());
                }
                for r in &idd.rails {
                    let f = |field: &str| format!("idd.rails[{}].{field}", r.name);
                    number(&f("volts"), r.volts, true)?;
                    number(&f("read"), r.read, false)?;
                    number(&f("write"), r.write, false)?;
                    number(&f("active_idle"), r.active_idle, false)?;
                    number(&f("self_refresh"), r.self_refresh, false)?;
                    if let Some(d) = r.deep_power_down {
                        number(&f("deep_power_down"), d, false)?;
                    }
                }
                let some = idd
                    .rails
                    .iter()
                    .filter(|r| r.deep_power_down.is_some())
                    .count();
                if some != 0 && some != idd.rails.len() {
                    return Err(
                        "idd.rails: deep_power_down must be given for every rail or none".into(),
                    );
                }
            }
        }
        let model = PowerModel { spec };
        let bank = 1 << 27;
        let p = |s| model.state_power(s, bank);
        let always = |s| p(s).expect("every model has the first three states");
        let (rw, idle, sr) = (
            always(PowerState::ReadWrite),
            always(PowerState::ActiveIdle),
            always(PowerState::SelfRefresh),
        );
        if !(rw >= idle && idle >= sr) {
            return Err(format!(
                "power must not rise from Read/Write ({rw}) to Active-Idle ({idle}) to Self-Refresh ({sr})"
            ));
        }
        if let Some(dpd) = p(PowerState::DeepPowerDown) {
            if dpd > sr {
                return Err(format!(
                    "Deep-Power-Down ({dpd}) draws more than Self-Refresh ({sr})"
                ));
            }
        }
        match model.spec.offline_state {
            PowerState::SelfRefresh => {}
            PowerState::DeepPowerDown if p(PowerState::DeepPowerDown).is_some() => {}
            PowerState::DeepPowerDown => {
                return Err(
                    "offline_state = \"deep_power_down\" but the model has no deep power-down current".into(),
                )
            }
            other => {
                return Err(format!(
                    "offline_state = {other:?}: a bank without data goes to self_refresh or deep_power_down"
                ))
            }
        }
        Ok(model)
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &PowerSpec {
        &self.spec
    }

    /// Units of power and energy.
    pub fn units(&self) -> Units {
        if self.spec.relative.is_some() {
            Units {
                power: "% of a bank in Read/Write",
                energy: "bank-%·s",
            }
        } else {
            Units {
                power: "mW",
                energy: "mJ",
            }
        }
    }

    /// Power of one bank of `bank_bytes` in `state`; `None` for a state
    /// the device does not have.
    fn state_power(&self, state: PowerState, bank_bytes: u64) -> Option<f64> {
        if let Some(r) = &self.spec.relative {
            return Some(match state {
                PowerState::ReadWrite => r.read_write,
                PowerState::ActiveIdle => r.active_idle,
                PowerState::SelfRefresh => r.self_refresh,
                PowerState::DeepPowerDown => r.deep_power_down,
            });
        }
        let idd = self.spec.idd.as_ref().expect("checked: relative or idd");
        let mut device_mw = 0.0;
        for rail in &idd.rails {
            let ma = match state {
                PowerState::ReadWrite => (rail.read + rail.write) / 2.0,
                PowerState::ActiveIdle => rail.active_idle,
                PowerState::SelfRefresh => rail.self_refresh,
                PowerState::DeepPowerDown => rail.deep_power_down?,
            };
            device_mw += ma * rail.volts;
        }
        let rank_mw = device_mw * f64::from(idd.devices_per_rank);
        Some(rank_mw * bank_bytes as f64 / self.rank_bytes())
    }

    /// Bytes in one rank (IDD models).
    fn rank_bytes(&self) -> f64 {
        let idd = self.spec.idd.as_ref().expect("idd model");
        idd.device_gbit * f64::from(idd.devices_per_rank) * (1u64 << 30) as f64 / 8.0
    }

    /// Power of one bank of `bank_bytes` in `state`, in `units().power`.
    /// A state the device lacks (deep power-down on DDR4) is counted as
    /// self-refresh.
    pub fn bank_power(&self, state: PowerState, bank_bytes: u64) -> f64 {
        self.state_power(state, bank_bytes)
            .or_else(|| self.state_power(PowerState::SelfRefresh, bank_bytes))
            .expect("self-refresh is always modelled")
    }

    /// The state a bank with nothing allocated goes to.
    pub fn offline_state(&self) -> PowerState {
        self.spec.offline_state
    }

    /// Energy (in `units().energy`) to copy one byte from one bank to
    /// another, over what the two would draw idle.
    ///
    /// IDD models: the rank's extra current for a read burst plus a write
    /// burst (IDD4R − IDD3N, IDD4W − IDD3N on every rail, every device),
    /// over the time a byte takes on the bus. Relative model: both banks
    /// in Read/Write instead of Active-Idle at the copy bandwidth.
    pub fn copy_energy_per_byte(&self) -> f64 {
        if let Some(r) = &self.spec.relative {
            return 2.0 * (r.read_write - r.active_idle) / (r.copy_bandwidth_gb_per_s * 1e9);
        }
        let idd = self.spec.idd.as_ref().expect("idd model");
        let extra_mw: f64 = idd
            .rails
            .iter()
            .map(|r| (r.read - r.active_idle + r.write - r.active_idle) * r.volts)
            .sum::<f64>()
            * f64::from(idd.devices_per_rank);
        let bytes_per_s = idd.data_rate_mt_per_s * 1e6 * f64::from(idd.bus_bytes);
        extra_mw / bytes_per_s
    }
}

fn alloc_name(name: &str) -> String {
    format!("power preset {name}")
}

/// Energy of the banks of one machine over a run.
#[derive(Clone, Debug)]
pub struct EnergyMeter {
    model: PowerModel,
    bank_bytes: u64,
    banks: usize,
    up_bank_seconds: f64,
    down_bank_seconds: f64,
    copied_bytes: u64,
    seconds: f64,
}

/// What an [`EnergyMeter`] measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// Unit of the energy figures.
    pub unit: String,
    /// Seconds metered.
    pub seconds: f64,
    /// Background energy of the banks: up ones in Active-Idle, the others
    /// in the offline state.
    pub background: f64,
    /// Energy of migration's copies.
    pub migration: f64,
    /// `background + migration`.
    pub total: f64,
    /// What every bank up the whole time would have drawn (no PASR).
    pub all_up: f64,
    /// Saving against `all_up`, percent.
    pub saving_percent: f64,
    /// Bytes copied by migration.
    pub copied_bytes: u64,
    /// Mean share of banks down, percent.
    pub mean_down_percent: f64,
}

impl EnergyMeter {
    /// A meter for `banks` banks of `bank_bytes` each.
    pub fn new(model: PowerModel, bank_bytes: u64, banks: usize) -> EnergyMeter {
        EnergyMeter {
            model,
            bank_bytes,
            banks,
            up_bank_seconds: 0.0,
            down_bank_seconds: 0.0,
            copied_bytes: 0,
            seconds: 0.0,
        }
    }

    /// `seconds` pass with `up` banks holding data (the rest down).
    /// `up` above the bank count is clamped to it.
    pub fn advance(&mut self, seconds: f64, up: usize) {
        let up = up.min(self.banks);
        self.seconds += seconds;
        self.up_bank_seconds += seconds * up as f64;
        self.down_bank_seconds += seconds * (self.banks - up) as f64;
    }

    /// Migration copied `bytes`.
    pub fn copy(&mut self, bytes: u64) {
        self.copied_bytes += bytes;
    }

    /// The figures so far.
    pub fn report(&self) -> EnergyReport {
        let idle = self
            .model
            .bank_power(PowerState::ActiveIdle, self.bank_bytes);
        let down = self
            .model
            .bank_power(self.model.offline_state(), self.bank_bytes);
        let background = self.up_bank_seconds * idle + self.down_bank_seconds * down;
        let migration = self.copied_bytes as f64 * self.model.copy_energy_per_byte();
        let total = background + migration;
        let all_up = self.seconds * self.banks as f64 * idle;
        EnergyReport {
            unit: self.model.units().energy.to_owned(),
            seconds: self.seconds,
            background,
            migration,
            total,
            all_up,
            saving_percent: if all_up > 0.0 {
                100.0 * (1.0 - total / all_up)
            } else {
                0.0
            },
            copied_bytes: self.copied_bytes,
            mean_down_percent: if self.seconds > 0.0 && self.banks > 0 {
                100.0 * self.down_bank_seconds / (self.seconds * self.banks as f64)
            } else {
                0.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_load_and_keep_their_order_of_states() {
        for name in PowerModel::preset_names() {
            let m = PowerModel::preset(name).unwrap();
            let p = |s| m.bank_power(s, 1 << 27);
            assert!(
                p(PowerState::ReadWrite) > p(PowerState::ActiveIdle),
                "{name}"
            );
            assert!(
                p(PowerState::ActiveIdle) > p(PowerState::SelfRefresh),
                "{name}"
            );
            assert!(
                p(PowerState::SelfRefresh) >= p(PowerState::DeepPowerDown),
                "{name}"
            );
            assert!(m.copy_energy_per_byte() > 0.0, "{name}");
        }
    }

    #[test]
    fn seed_table_1_as_given() {
        let m = PowerModel::preset("seed004-relative").unwrap();
        let p = |s| m.bank_power(s, 1 << 27);
        assert_eq!(
            PowerState::ALL.map(p),
            [100.0, 63.0, 7.0, 1.0],
            "Table 1 of seed 004"
        );
        assert_eq!(m.offline_state(), PowerState::DeepPowerDown);
    }

    #[test]
    fn ddr4_figures_follow_from_the_datasheet_currents() {
        let m = PowerModel::preset("ddr4-2400-micron").unwrap();
        // A whole rank: 8 devices of 4 Gbit = 4 GiB.
        let rank = 4u64 << 30;
        let idle = m.bank_power(PowerState::ActiveIdle, rank);
        assert!((idle - 8.0 * 44.0 * 1.2).abs() < 1e-9, "{idle}");
        let sr = m.bank_power(PowerState::SelfRefresh, rank);
        assert!((sr - 8.0 * (20.25 * 1.2 + 2.6 * 2.5)).abs() < 1e-9, "{sr}");
        // No deep power-down on DDR4: counted as self-refresh.
        assert_eq!(m.bank_power(PowerState::DeepPowerDown, rank), sr);
        // A 128 MiB bank is 1/32 of the rank.
        assert!((m.bank_power(PowerState::ActiveIdle, 1 << 27) * 32.0 - idle).abs() < 1e-9);
        // Copy: (IDD4R - IDD3N + IDD4W - IDD3N) * VDD * 8 devices over 19.2 GB/s.
        let want = (184.5 - 44.0 + 168.75 - 44.0) * 1.2 * 8.0 / 19.2e9;
        assert!((m.copy_energy_per_byte() - want).abs() < 1e-18);
    }

    #[test]
    fn meter_counts_up_and_down_banks_and_copies() {
        let m = PowerModel::preset("seed004-relative").unwrap();
        let mut meter = EnergyMeter::new(m, 1 << 27, 10);
        meter.advance(2.0, 10);
        meter.advance(2.0, 5);
        meter.copy(12_800_000_000);
        let r = meter.report();
        assert_eq!(
            r.background,
            2.0 * 10.0 * 63.0 + 2.0 * (5.0 * 63.0 + 5.0 * 1.0)
        );
        assert!((r.migration - 2.0 * 37.0).abs() < 1e-9);
        assert_eq!(r.all_up, 4.0 * 10.0 * 63.0);
        assert_eq!(r.mean_down_percent, 25.0);
    }

    #[test]
    fn bad_models_name_the_field() {
        let base = include_str!("../presets/power/seed004-relative.toml");
        let bad = base.replace("active_idle = 63.0", "active_idle = 163.0");
        let err = PowerModel::from_toml_str(&bad, "x.toml").unwrap_err();
        assert!(
            err.to_string().contains("x.toml: power must not rise"),
            "{err}"
        );
        let bad = base.replace("read_write = 100.0", "read_write = -1.0");
        let err = PowerModel::from_toml_str(&bad, "x.toml").unwrap_err();
        assert!(
            err.to_string().contains("relative.read_write = -1"),
            "{err}"
        );
        let bad = base.replace("[relative]", "[relativ]");
        assert!(matches!(
            PowerModel::from_toml_str(&bad, "x.toml"),
            Err(PowerError::Parse { .. })
        ));
        let ddr4 = include_str!("../presets/power/ddr4-2400-micron.toml").replace(
            "offline_state = \"self_refresh\"",
            "offline_state = \"deep_power_down\"",
        );
        let err = PowerModel::from_toml_str(&ddr4, "d.toml").unwrap_err();
        assert!(err.to_string().contains("no deep power-down"), "{err}");
        assert!(matches!(
            PowerModel::load("nosuch"),
            Err(PowerError::UnknownPreset { .. })
        ));
        assert!(matches!(
            PowerModel::load("/nonexistent/p.toml"),
            Err(PowerError::Io { .. })
        ));
    }
}
