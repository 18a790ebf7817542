/**
 * Signing the kit's calls to the ledger (CONTRACT §12 "signs with SigV4 in AWS"): the protocol's signer,
 * the one the client signs with too. The kit applies it to every callback, upload and task read when one is set.
 */
export { sigv4Signer, type AwsCredentials, type AwsCredentialsProvider, type SignableRequest, type Signer, type Sigv4SignerOptions } from '@dispatch-ledger/protocol/sigv4';
