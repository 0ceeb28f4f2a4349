/**
 * `@platform/rate-limit/lua`: the Lua scripts as the layer assembles them
 * from `@platform/rate-limit-lua`, and the contract every check shares (its
 * call and its reply). A strategy's operations are packed by its unit
 * (`@platform/rate-limit/policy`).
 */

export { assembleEntry } from './assembly.ts';
export {
  type ClaimableCall,
  checkCall,
  checkReplyLayout,
  claimableCheckCall,
  genericCheckCall,
  parseCheckReply,
  type ResolvedLimit,
  type ScriptCall,
} from './contract.ts';
export {
  assembleScripts,
  checkScriptName,
  ENTRY_SCRIPTS,
  entryFiles,
  fragmentsOf,
  type LuaScript,
  productionScripts,
  type ScriptSet,
} from './scripts.ts';
