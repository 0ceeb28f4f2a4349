/**
 * The regional settings of the layer (read by settings.ts with the rest):
 * this region's name, the home region's, every region's, and the home
 * region's store. docs/multi-region.md, "Settings", lists them.
 */
import { InvalidSettingError } from '../core/errors.ts';

/** A region's name as the stores' keys carry it (`eu-west-1`): lowercase letters, digits and dashes. */
export const REGION_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

export interface RegionSettings {
  /** This region (RATE_LIMIT_REGION). @default 'local' */
  readonly region: string;
  /** Where home-mode policies are decided (RATE_LIMIT_HOME_REGION). @default this region */
  readonly homeRegion: string;
  /** Every region, in the same order everywhere (RATE_LIMIT_REGIONS): a share's initial split follows it. @default this region alone */
  readonly regions: readonly string[];
}

type Env = Readonly<Record<string, string | undefined>>;

function regionName(variable: string, text: string): string {
  if (!REGION_NAME.test(text)) {
    throw new InvalidSettingError(variable, 'must be a region name: lowercase letters, digits and dashes (eu-west-1)');
  }
  return text;
}

export function readRegionSettings(env: Env): RegionSettings {
  const region = regionName('RATE_LIMIT_REGION', env.RATE_LIMIT_REGION || 'local');
  const homeRegion = regionName('RATE_LIMIT_HOME_REGION', env.RATE_LIMIT_HOME_REGION || region);
  const listed = env.RATE_LIMIT_REGIONS ? env.RATE_LIMIT_REGIONS.split(',').map((r) => r.trim()) : [region];
  const regions = listed.map((r) => regionName('RATE_LIMIT_REGIONS', r));
  if (new Set(regions).size !== regions.length) {
    throw new InvalidSettingError('RATE_LIMIT_REGIONS', 'names a region twice');
  }
  if (regions.length > 16) throw new InvalidSettingError('RATE_LIMIT_REGIONS', 'names more than 16 regions');
  for (const [variable, name] of [
    ['RATE_LIMIT_REGION', region],
    ['RATE_LIMIT_HOME_REGION', homeRegion],
  ] as const) {
    if (!regions.includes(name)) throw new InvalidSettingError(variable, `"${name}" is not in RATE_LIMIT_REGIONS`);
  }
  return { region, homeRegion, regions };
}
