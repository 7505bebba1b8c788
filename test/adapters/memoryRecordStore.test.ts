/** The in-memory records adapter (core unit tests run on it) against the same contract as DynamoDB. */
import { MemoryRecordStore } from '../../src/adapters/memory/recordStore';
import { recordStoreContract } from '../helpers/recordStoreContract';

describe('the records port contract (in-memory adapter)', () => {
  const store = new MemoryRecordStore();
  recordStoreContract(() => store);
});
